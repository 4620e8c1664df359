"""The code pane: the generated LLVM IR (before and after LLVM's optimisation) and the
assembly of the current step (x86, or AArch64 for an ARM board) — for a GPU target its CUDA C, PTX and ptxas's resources with
the host's launches — compiled by a measurement worker (the web process never compiles).
"""
from __future__ import annotations

from ...service.protocol import PoolClosed, PoolUnavailable, QueueFull
from .. import measuring
from ..services import measurer
from ..session import Session

#: How long the code pane waits for its compile before answering "queued" and polling.
CODE_BUDGET_S = 3.0
#: Lines of code text shown (the rest is cut, with a note).
MAX_LINES = 3000
#: the code views of a CPU session and of a GPU session (``kind=``; the first the default)
CPU_KINDS = ("ll-opt", "asm", "ll")
GPU_KINDS = ("cuda", "ptx", "resources")


def kinds(session: Session) -> tuple:
    return GPU_KINDS if session.gpu else CPU_KINDS


def context(session: Session, kind: str) -> dict:
    """The code pane: the optimised LLVM IR (``ll-opt``) or the assembly (``asm``) of the
    current step, compiled by a worker; "queued" (the pane polls) rather than hold a server
    thread while the queue is long."""
    mod = session.mod_at(session.at)
    m = measurer()
    try:
        got, ticket = m.submit_source(mod, target=session.job_target)
    except QueueFull:
        return {"queued": measuring.queued_text(None), "text": None, "kind": kind}
    except (PoolClosed, PoolUnavailable) as e:
        return {"error": str(e), "text": None, "kind": kind}
    if got is None:
        try:
            got = m.source_result_of(ticket, CODE_BUDGET_S)
        except TimeoutError:
            return {"queued": measuring.queued_text(ticket.position()), "text": None,
                    "kind": kind}
    text, err = m.source_text(got, kind)
    if text is None:
        return {"error": err, "text": None, "kind": kind}
    lines = text.splitlines()
    return {"error": None, "kind": kind, "text": "\n".join(lines[:MAX_LINES]),
            "truncated": len(lines) > MAX_LINES, "nlines": len(lines)}
