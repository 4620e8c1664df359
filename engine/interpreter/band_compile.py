"""The numpy band evaluator, compiled: a planned band (:mod:`.band_plan`) becomes
``run(env) -> bool`` that sets each band loop variable to the array of its values over all
iterations, evaluates the block bindings, predicate, index and value on those arrays and
stores through :mod:`.band_run` (False: the lanes are not independent after all, run the
nest serially)."""
from __future__ import annotations

from typing import Callable

import numpy as np

from engine.ir import expr as E
from engine.ir import stmt as S

from .access import AccessCompiler
from .band_plan import BandPlan
from .band_run import band_elementwise, band_reduce, take_lanes
from .errors import bad_binding
from .values import NC, const_value, np_dtype


class BandCompiler(AccessCompiler):
    """Compiles bands to numpy operations over all their lanes."""

    def _compile_band(self, plan: BandPlan) -> Callable[[list], bool] | None:
        saved_varying, saved_vslots = self.varying, self.vslots
        self.varying, self.vslots = set(), []
        bound: list[E.Var] = []
        try:
            grids = []
            lanes = plan.lanes
            stride = lanes
            for lp in plan.loops:
                lo, ext = E.as_const_int(lp.min), E.as_const_int(lp.extent)
                stride //= ext
                dt = np_dtype(lp.loop_var.dtype)
                grid = (lo + (np.arange(lanes, dtype=np.int64) // stride) % ext).astype(dt)
                grid.flags.writeable = False
                slot = self.bind(lp.loop_var)
                bound.append(lp.loop_var)
                self.varying.add(id(lp.loop_var))
                self.vslots.append(slot)
                grids.append((slot, grid))
            return self._band_body_fn(plan, grids, bound)
        finally:
            for v in reversed(bound):
                self.unbind(v)
            self.varying, self.vslots = saved_varying, saved_vslots

    def _band_body_fn(self, plan: BandPlan, grids: list, bound: list
                      ) -> Callable[[list], bool] | None:
        realize, store = plan.realize, plan.store
        vslots = self.vslots
        binds: list = []
        checks: list = []
        red_slots: list = []
        pred = init_val = init_mask = None
        name = realize.block.name_hint if realize is not None else None
        if realize is not None:
            blk = realize.block
            for iv, val in zip(blk.iter_vars, realize.iter_values):
                f = self.expr(val)
                varying = self._depends(val)
                slot = self.bind(iv.var)
                bound.append(iv.var)
                if varying:
                    self.varying.add(id(iv.var))
                    self.vslots.append(slot)
                lo, ext = E.as_const_int(iv.dom.min), E.as_const_int(iv.dom.extent)
                if lo is None or ext is None:
                    return None
                binds.append((slot, f))
                checks.append((slot, lo, lo + ext, iv.var.name))
                if iv.iter_type is S.IterType.REDUCE:
                    red_slots.append((slot, lo))
            pc = const_value(realize.predicate)
            if not (pc is not NC and pc):
                pred = self.expr(realize.predicate)
            self.blocks.append(name)
        try:
            buf = store.buffer
            sslot = self.buffer_slot(buf, "written")
            self.stored.add(id(buf))
            where = self.where()
            fidx = [self.expr(i) for i in store.indices]
            if realize is not None and realize.block.init is not None:
                init_val = self.expr(realize.block.init.value)
                init_mask = tuple(red_slots)
            if plan.cls == "R":
                term = self.expr(plan.reduction[1])
            else:
                fval = self.expr(store.value)
        finally:
            if realize is not None:
                self.blocks.pop()
        shape = tuple(E.as_const_int(x) for x in buf.shape)
        if any(x is None for x in shape):
            return None
        dt = np_dtype(buf.dtype)
        op = plan.reduction[0] if plan.cls == "R" else None

        def run(env) -> bool:
            for slot, grid in grids:
                env[slot] = grid
            n = plan.lanes
            for slot, f in binds:
                env[slot] = f(env)
            if pred is not None:
                m = pred(env)
                if isinstance(m, np.ndarray):
                    if not m.all():
                        keep = np.flatnonzero(m)
                        if keep.size == 0:
                            return True
                        take_lanes(env, [(sl, env[sl]) for sl in vslots], n, keep)
                        n = keep.size
                elif not m:
                    return True
            for slot, lo, hi, nm in checks:
                v = env[slot]
                if isinstance(v, np.ndarray):
                    bad = (v < lo) | (v >= hi)
                    if bad.any():
                        bad_binding(name, nm, int(v[np.argmax(bad)]), lo, hi)
                elif not lo <= v < hi:
                    bad_binding(name, nm, v, lo, hi)
            arr = env[sslot]
            idx = tuple(f(env) for f in fidx)
            mask = None
            if init_mask is not None:
                mask = True
                for slot, lo in init_mask:
                    mask = mask & (env[slot] == lo)
            if op is None:
                return band_elementwise(env, arr, idx, n, shape, buf, where, mask, init_val,
                                        fval, vslots)
            return band_reduce(env, arr, idx, n, buf, where, mask, init_val, term, op, dt,
                               vslots)
        return run
