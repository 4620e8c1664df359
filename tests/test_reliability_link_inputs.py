"""What a link carries is held to the server's limits on every route: a custom program's
``src=`` (inflated with a cap, then max_script_chars / max_script_lines), the bytes of a
workload's buffers (max_buffer_bytes), and numbers written with the digits 0-9 only."""
from __future__ import annotations

import base64
import zlib

import pytest

from app.web import session as session_mod
from app.web.session import encode_src
from inline_service import make_test_app

HEAD = "@T.prim_func\ndef f(A: T.Buffer((4,), \"float32\")):\n"
PROGRAM = '''@T.prim_func
def f(A: T.Buffer((4,), "float32"), B: T.Buffer((4,), "float32")):
    T.func_attr({"global_symbol": "f", "tir.noalias": True})
    for i in range(4):
        with T.block("B"):
            vi = T.axis.spatial(4, i)
            B[vi] = A[vi] + T.float32(1)
'''


@pytest.fixture(scope="module")
def client():
    return make_test_app().test_client()


@pytest.fixture()
def inflated(monkeypatch):
    """Bytes the zlib decompressor produces (whichever of its entry points is used)."""
    out: list[int] = []
    real_obj, real_decompress = zlib.decompressobj, zlib.decompress

    class Counting:
        def __init__(self, *a, **k):
            self._d = real_obj(*a, **k)

        def decompress(self, data, max_length=0):
            got = self._d.decompress(data, max_length)
            out.append(len(got))
            return got

        def __getattr__(self, name):
            return getattr(self._d, name)

    def decompress(data, *a, **k):
        got = real_decompress(data, *a, **k)
        out.append(len(got))
        return got
    monkeypatch.setattr(zlib, "decompressobj", Counting)
    monkeypatch.setattr(zlib, "decompress", decompress)
    return out


def _text(r) -> str:
    return " ".join(r.get_data(as_text=True).split())


# ---------------------------------------------------------------------------- src= bombs
def test_a_zlib_bomb_in_src_is_refused_with_the_limit_and_inflated_only_to_it(client, inflated):
    bomb = HEAD + ("    # " + "x" * 30 + "\n") * 100_000        # 3.7 MB in a 14 KB link
    tok = encode_src(bomb)
    assert len(tok) < 16_000
    r = client.get(f"/explore/custom?src={tok}")
    limit = client.application.extensions["limits"].max_script_chars
    assert r.status_code == 400
    assert "max_script_chars" in _text(r) and str(limit) in _text(r)
    assert sum(inflated) <= limit + 1


def test_src_over_the_line_limit_is_refused_on_get(client):
    r = client.get("/explore/custom?src=" + encode_src(HEAD + "    pass\n" * 6000))
    assert r.status_code == 400 and "max_script_lines" in _text(r)


def test_every_route_that_reads_src_holds_it_to_the_limits(client):
    tok = encode_src(HEAD + "    pass\n" * 6000)
    for url in (f"/explore/custom/measure?src={tok}", f"/explore/custom/code?src={tok}",
                f"/explore/custom/export/json?src={tok}",
                f"/compare?a=/explore/custom?src={tok}&b=/explore/custom?src={tok}"):
        r = client.get(url)
        assert r.status_code == 400 and "max_script_lines" in _text(r), url
    r = client.post("/explore/custom/apply", data={"src": tok, "primitive": "split"})
    assert r.status_code == 400 and "max_script_lines" in _text(r)


def test_src_within_the_limits_still_opens_also_with_non_ascii_text(client):
    assert client.get("/explore/custom?src=" + encode_src(PROGRAM)).status_code == 200
    text = PROGRAM + "# " + "é" * 1000 + "\n"
    assert client.get("/explore/custom?src=" + encode_src(text)).status_code == 200


def test_inflate_text_is_capped_and_exact_at_the_limit():
    inflate = session_mod.inflate_text
    ascii10 = zlib.compress(b"x" * 10)
    assert inflate(ascii10, 10) == "x" * 10
    assert inflate(ascii10, 9) is None
    wide = zlib.compress(("é" * 10).encode())                     # 20 bytes, 10 characters
    assert inflate(wide, 10) == "é" * 10 and inflate(wide, 9) is None
    with pytest.raises(zlib.error):
        inflate(zlib.compress(b"y" * 1000)[:-6], 2000)              # cut when copied


def test_a_cut_src_is_a_corrupt_link(client):
    raw = zlib.compress(PROGRAM.encode(), 9)[:-6]
    tok = base64.urlsafe_b64encode(raw).decode().rstrip("=")
    r = client.get(f"/explore/custom?src={tok}")
    assert r.status_code == 400 and "damaged" in _text(r)


# ---------------------------------------------------------------------------- buffer bytes
def test_sizes_whose_buffers_are_over_max_buffer_bytes_are_refused_naming_the_buffer(client):
    r = client.get("/explore/sum?m=900&n=1048576")                  # A alone: 3.5 GiB
    assert r.status_code == 400
    text = _text(r)
    assert "max_buffer_bytes" in text and "256 MiB" in text and "A, alone is 3.5 GiB" in text
    r = client.get("/explore/conv2d?batch=16&in_channels=512&size=256")
    assert r.status_code == 400 and "max_buffer_bytes" in _text(r)


def test_an_import_at_sizes_over_max_buffer_bytes_is_refused(client):
    doc = ('{"format": "schedule-explorer/trace", "version": 1, "insts": [], '
           '"workload": {"name": "sum", "params": {"m": 900, "n": 1048576}}}')
    r = client.post("/import", data={"text": doc})
    assert r.status_code == 400 and "max_buffer_bytes" in _text(r)


def test_large_sizes_within_max_buffer_bytes_still_open(client):
    for url in ("/explore/matmul?m=2048&n=2048&k=2048", "/explore/softmax?m=4096&n=4096",
                "/explore/sum?m=32&n=1048576"):
        assert client.get(url).status_code == 200, url


# ---------------------------------------------------------------------------- digits
NOT_DIGITS = ["1_000", "+5", " 7", "7 ", "٣٢", "３２", "-1", "0x10", "1e3", "²"]


@pytest.mark.parametrize("raw", NOT_DIGITS)
def test_sizes_are_ascii_digits_only(client, raw):
    r = client.get("/explore/mm_relu", query_string={"n": raw})
    assert r.status_code == 400 and "digits 0-9" in _text(r), raw


@pytest.mark.parametrize("raw", NOT_DIGITS)
def test_step_numbers_are_ascii_digits_only(client, raw):
    from engine.schedule import Schedule
    import engine
    sch = Schedule(engine.workloads.get("mm_relu", n=128), workload=("mm_relu", {"n": 128}))
    sch.split(sch.get_loops(sch.get_block("Y"))[0], [None, 4])
    r = client.get("/explore/mm_relu", query_string={"t": sch.trace.encode(), "at": raw})
    assert r.status_code == 400 and "digits 0-9" in _text(r), raw


@pytest.mark.parametrize("raw", ["+1", " 1", "0_1", "١", "１"])
def test_lesson_steps_are_ascii_digits_only(client, raw):
    assert client.get("/lessons/01_tensorir_mm_relu?step=1").status_code == 200
    r = client.get("/lessons/01_tensorir_mm_relu", query_string={"step": raw})
    assert r.status_code == 400 and "Bad step number" in _text(r), raw


@pytest.mark.parametrize("raw", ["1_0", "+1", "٣", "３"])
def test_iterations_factors_and_selections_are_ascii_digits_only(client, raw):
    from app.web.selection import parse_sel
    from app.web.toolbar import InputError, parse_factors
    assert parse_sel(f"L/mm_relu/{raw}/Y") is None
    with pytest.raises(InputError, match="whole number"):
        parse_factors(f"None, {raw}")
    r = client.get("/explore/mm_relu/pattern",
                   query_string={"sel": "L/mm_relu/0/Y", "iteration": raw})
    assert "Iteration must be a whole number" in _text(r), raw


def test_the_limits_refuse_non_ascii_digit_sizes():
    from app.limits import DEFAULT_LIMITS, InputError, whole_number
    for raw in NOT_DIGITS:
        assert whole_number(raw) is None, raw
        with pytest.raises(InputError):
            DEFAULT_LIMITS.check_params("mm_relu", {"n": raw})
    assert whole_number("0128") == 128
    assert DEFAULT_LIMITS.check_params("mm_relu", {"n": "128"}) == {"n": 128}
