"""``import engine; engine.tune...``: the tuner reached from a plain ``import engine`` (the
README's Dask example writes ``engine.tune.DaskRunner``), imported only when asked for."""
from __future__ import annotations

import subprocess
import sys
import textwrap


def test_engine_tune_after_a_plain_import_engine():
    code = textwrap.dedent("""
        import sys
        import engine
        assert "engine.tune" not in sys.modules, "import engine imported the tuner"
        assert engine.tune.DaskRunner.__name__ == "DaskRunner"
        from engine.tune.examples import stochastic_mm_relu
        res = engine.tune.tune(("mm_relu", {"n": 16}), space=stochastic_mm_relu, trials=2,
                               strategy="random", runner=engine.tune.InlineRunner())
        assert res.best is not None and res.best.seconds > 0
        print("ok", res.best.gflops > 0)
    """)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == ["ok", "True"]
