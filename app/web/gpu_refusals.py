"""The refusals of a GPU session's step, as the CPU's: one sentence, the parts highlighted,
the state unchanged.

Two kinds of GPU refusals exist, found at two moments:

* **At the click** (:func:`shared_memory_refusal`, called by ``routes.apply_form`` within
  the request's work budget): a step that makes a kernel need more shared memory per
  thread block than the target allows. The footprint is read by the engine's static part
  of the GPU lowering (:func:`engine.gpu.footprint.shared_footprints`: no code is built),
  so it is known in the web process. TVM finds the same thing only when it builds; the
  explorer says it at the step that caused it, where the learner can pick another loop.
  More than 1024 threads per block is refused by ``bind`` itself.

  The rule: refuse a step when, after it, a *kernel* (a top-level nest whose outermost
  loop is bound to a thread axis) holds *placed* shared tiles (stages used only inside
  that kernel, i.e. computed at one of its loops) whose sum is over the GPU's static
  per-block limit — and the state before the step was not already over it (a link or an
  imported trace may open such a state: then every step is allowed, or the learner could
  not leave it). States on the way to a kernel are never refused: a ``cache_read`` stage
  not computed inside a kernel yet, a nest whose inner loop is bound but not its outer one
  ("a loop around a kernel"), a barrier the lowering would need under a thread-dependent
  loop. Each of those becomes buildable by a further step (bind the outer loop, move the
  stage), so the build, in the measurement workers, says what is missing on the step's row
  and the state stays. Shared memory over the limit could also be undone by a further
  step (computing the stage at a deeper loop), but the issue names it as a refusal and it
  is where a learner's choice of loop went wrong: the sentence names the tiles, the stage
  and the loop it is computed at, and both are highlighted.

* **From the worker** (:func:`race_of`): a data race is found only by running the kernels
  in the emulator. When the measurement of the step the learner just made (the trace's
  last step, on view) says "race", the measurement pane withdraws the step: the page goes
  back to the state before it (the trace without the step) and shows the race's sentence
  with the blocks that touch the buffer highlighted (``templates/panes/measure.html``,
  ``static/explorer.js``).
"""
from __future__ import annotations

from typing import Any

from engine.schedule import ScheduleError

from ..kept import KiB, Kept

#: the prefix of a step's ``error`` when the emulator's race check refused it
#: (app.service.timing)
RACE_PREFIX = "refused by the emulator's race check: "


#: the toolbar's primitives that never change a shared tile: loop extents, bindings, where
#: stages are computed and buffer scopes stay (vectorize and unroll change a loop's kind,
#: decompose_reduction adds an init block writing the reduction's own buffer)
KEEPS_TILES = frozenset({"vectorize", "unroll", "decompose_reduction"})

#: the kernels over the limit of the programs checked lately, by the state's link: the
#: form measured ahead (``/intent``) and its click check the same program once
_CHECKED: Kept = Kept(256 * KiB)


def over_the_limit(target: Any, mod: Any, key: str | None = None) -> tuple:
    """The kernels of ``mod`` whose placed shared tiles are over ``target``'s per-block
    limit (:func:`engine.gpu.footprint.shared_footprints`), kept under ``key`` (the state's
    link) when given."""
    from engine.gpu.footprint import over_shared_limit, shared_footprints
    if key is not None:
        got = _CHECKED.get((key, target.key))
        if got is not None:
            return got
    over = tuple(over_shared_limit(shared_footprints(mod, target.engine), target.engine))
    if key is not None:
        _CHECKED.put((key, target.key), over, nbytes=len(key) + 256 * (1 + len(over)))
    return over


def shared_memory_refusal(target: Any, primitive: str, before: Any, after: Any,
                          after_key: str | None = None) -> ScheduleError | None:
    """The refusal of a step from the program ``before`` to ``after`` (IRModules; the
    latter's link ``after_key``) on the GPU ``target``
    (:class:`app.web.targets.TargetChoice`), or None (module docstring)."""
    from engine.gpu.footprint import shared_limit_sentence
    if not target.is_gpu or primitive in KEEPS_TILES:
        return None
    over = over_the_limit(target, after, after_key)
    if not over:
        return None
    if over_the_limit(target, before):
        return None
    fp = over[0]
    big = max(fp.tiles, key=lambda t: t.bytes)
    names = [n for t in fp.tiles for n in (*t.writers, t.at_loop) if n]
    where = f" (the stage {', '.join(big.writers)} computed at loop {big.at_loop})" \
        if big.writers and big.at_loop else ""
    return ScheduleError(
        primitive or "this step", "", shared_limit_sentence(fp, target.engine) + where,
        "compute the stage at a deeper loop (one iteration of it needs a smaller tile), or "
        "split the loops into smaller tiles first", highlight=names)


def race_of(result: Any) -> str | None:
    """The race sentence of a GPU step's measurement (``timing.measure_gpu_step``'s dict),
    or None when it was not refused by the race check."""
    if not isinstance(result, dict):
        return None
    race = result.get("race")
    if isinstance(race, dict) and isinstance(race.get("text"), str):
        return race["text"]
    err = result.get("error")
    if isinstance(err, str) and err.startswith(RACE_PREFIX):
        return err[len(RACE_PREFIX):]
    return None


def race_highlight(result: Any) -> list[str]:
    """The block names a race result points at (the blocks touching its buffer)."""
    race = result.get("race") if isinstance(result, dict) else None
    if not isinstance(race, dict):
        return []
    blocks = race.get("blocks")
    if not isinstance(blocks, list):
        return []
    return [b for b in blocks if isinstance(b, str)][:8]


def withdrawal(session: Any, current: Any) -> dict | None:
    """What the measurement pane says and does when the worker's result for the step on
    view is a race and that step is the trace's last (the one just made): the sentence, the
    link of the state before it (the trace without the step), the blocks to highlight in
    that state's program, and this state's link (the page's history entry to replace).
    None otherwise: an earlier step's race stays on its row."""
    from .selection import module_trees, names_to_sels
    if session.gpu is None or session.at < 1 or session.at != session.nsteps:
        return None
    text = race_of(current)
    if text is None:
        return None
    k = session.at
    before = session.mod_at(k - 1)
    return {"step": k,
            "text": f"Step {k} is withdrawn: the emulator found a {text[0].lower()}{text[1:]}",
            "back": session.url(token=session.prefix_token(k - 1), at=None),
            "state": session.url(),
            "highlight": names_to_sels(module_trees(before), race_highlight(current))}
