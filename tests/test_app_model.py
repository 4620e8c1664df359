"""The model page: graph and functions, links into the explorer, traces applied per function
and to every function of the same shape, the measurement job (inline service), and refusals."""
from __future__ import annotations

import re
from urllib.parse import parse_qs, urlparse

import numpy as np
import pytest

import engine
from engine import IRModule
from inline_service import drain, make_test_app


@pytest.fixture(scope="module")
def client():
    app = make_test_app()
    with app.app_context():
        yield app, app.test_client()


def _html(r):
    return r.get_data(as_text=True)


def _fused_trace_token() -> str:
    from engine.models.course import mlp_module
    from engine.models.pipeline import stage_module

    mod, _ = stage_module(mlp_module(1), "fused")
    one = IRModule((("fused_linear0_relu0", mod["fused_linear0_relu0"]),))
    sch = engine.Schedule(one)
    y = sch.get_block("Y")
    _, j, _ = sch.get_loops(y)
    sch.reverse_compute_at(sch.get_block("Z"), j)
    return sch.trace.encode()


def test_page_shows_the_fused_graph_and_links_each_function_into_the_explorer(client):
    app, c = client
    r = c.get("/model/mlp?batch=1&fused=1")
    assert r.status_code == 200
    html = _html(r)
    assert '<svg class="model-graph"' in html and "fused group" in html
    assert 'id="fn-fused_linear0_relu0"' in html and 'id="fn-linear1"' in html
    assert "label " in html and "predicted " in html and 'id="accuracy"' in html
    links = re.findall(r'class="fname" href="([^"]+)"', html)
    assert len(links) == 2
    r2 = c.get(links[0].replace("&amp;", "&"))
    assert r2.status_code == 200 and "fused_linear0_relu0" in _html(r2)
    unfused = _html(c.get("/model/mlp?batch=1&fused=0"))
    assert 'id="fn-linear0"' in unfused and 'id="fn-relu0"' in unfused
    assert "fused group" not in unfused


def test_a_pasted_explorer_link_schedules_the_function_and_the_link_keeps_it(client):
    app, c = client
    token = _fused_trace_token()
    link = "http://127.0.0.1:5000/explore/custom?src=abc&t=" + token
    r = c.post("/model/mlp/apply", data={"batch": "1", "fused": "1",
                                         "func": "fused_linear0_relu0", "trace": link,
                                         "scope": "one"})
    assert r.status_code == 303
    q = parse_qs(urlparse(r.headers["Location"]).query)
    assert q["t.fused_linear0_relu0"] == [token]
    page = _html(c.get(r.headers["Location"]))
    assert "schedule steps" in page and "scheduled: " in page
    # the measurement: every stage plus this link's, all matching numpy
    url = r.headers["Location"].replace("/model/mlp?", "/model/mlp/measure?")
    c.get(url)
    drain(app)
    pane = _html(c.get(url))
    assert "this link&#39;s schedules" in pane or "this link's schedules" in pane
    assert 'id="engine-accuracy"' in pane and 'id="model-plot"' in pane
    assert pane.count("<td>yes</td>") == 5


def test_same_shape_functions():
    from app.web.model import same_shape_functions
    from engine.relax.expr import Call, DataflowBlock, DataflowVar, Function, Op, SeqExpr, Var
    from engine.relax.expr import VarBinding
    from engine.relax.struct_info import TensorStructInfo
    from engine.relax.transform import LegalizeOps

    t = TensorStructInfo((4, 4), "float32")
    x = Var("x", t)
    a, b, c = DataflowVar("a", t), DataflowVar("b", t), Var("c", t)
    bs = (VarBinding(a, Call(Op("relax.nn.relu"), (x,), (), (), t)),
          VarBinding(b, Call(Op("relax.nn.relu"), (a,), (), (), t)),
          VarBinding(c, Call(Op("relax.add"), (a, b), (), (), t)))
    main = Function("main", (x,), SeqExpr((DataflowBlock(bs),), c), t)
    mod = LegalizeOps()(IRModule((("main", main),)))
    assert same_shape_functions(mod, "relu") == ["relu", "relu1"]
    assert same_shape_functions(mod, "add") == ["add"]


@pytest.mark.parametrize("url,status,words", [
    ("/model/resnet", 404, "no model named"),
    ("/model/mlp?batch=0", 400, "outside 1..64"),
    ("/model/mlp?batch=100000", 400, "max_model_batch"),
    ("/model/mlp?batch=1e3", 400, "not a whole number"),
    ("/model/mlp?t.nothere=AAAA", 400, "not a TensorIR function"),
    ("/model/mlp?t.linear1=%%%", 400, "trace"),
])
def test_bad_links_get_sentences(client, url, status, words):
    _, c = client
    r = c.get(url)
    assert r.status_code == status
    assert words in _html(r)


def test_a_trace_that_does_not_fit_the_function_is_refused(client):
    _, c = client
    r = c.post("/model/mlp/apply", data={"batch": "1", "fused": "1", "func": "linear1",
                                         "trace": _fused_trace_token(), "scope": "one"})
    assert r.status_code == 400 and "cannot be applied to it" in _html(r)
    r = c.post("/model/mlp/apply", data={"batch": "1", "fused": "1", "func": "linear1",
                                         "trace": "", "scope": "one"})
    assert r.status_code == 400 and "Paste the explorer" in _html(r)


def test_an_uploaded_onnx_model_gets_its_page_and_measurement(client):
    import io

    import onnx_models as om
    from onnx import helper

    app, c = client
    data = om.conv_net().SerializeToString()
    r = c.post("/model/onnx", data={"file": (io.BytesIO(data), "net.onnx")},
               content_type="multipart/form-data")
    assert r.status_code == 303
    url = r.headers["Location"]
    assert re.search(r"/model/onnx-[0-9a-f]{16}\?", url)
    page = _html(c.get(url))
    assert '<svg class="model-graph"' in page and "fused_conv2d_add_relu" in page
    murl = url.replace("?", "/measure?", 1)
    c.get(murl)
    drain(app)
    pane = _html(c.get(murl))
    assert pane.count("<td>yes</td>") == 4, pane[:2000]
    # refusals: an operator outside the set, a file that is not ONNX, nothing
    bad = om.model([helper.make_node("Sigmoid", ["x"], ["y"])], [("x", [2, 3])], [("y", [2, 3])])
    r = c.post("/model/onnx", data={"file": (io.BytesIO(bad.SerializeToString()), "s.onnx")},
               content_type="multipart/form-data")
    assert r.status_code == 400 and "Sigmoid" in _html(r)
    r = c.post("/model/onnx", data={"file": (io.BytesIO(b"garbage"), "g.onnx")},
               content_type="multipart/form-data")
    assert r.status_code == 400 and "not an ONNX model" in _html(r)
    assert c.post("/model/onnx", data={}).status_code == 400
    assert c.get("/model/onnx-0123456789abcdef").status_code == 404


def _relayout_token(mod, fname: str, index_map: str, block: str = "Y") -> str:
    """A trace giving ``fname``'s second read of ``block`` (its weight) another layout."""
    sch = engine.Schedule(IRModule(((fname, mod[fname]),)))
    sch.transform_layout(sch.get_block(block, func_name=fname), ("read", 1), index_map)
    return sch.trace.encode()


def test_the_stages_as_written_keep_the_course_layout_and_a_transposing_trace_works(client):
    """The unscheduled functions read W (128, 784) as the course writes it; the page says
    what the recipe does with the weights; a link whose trace stores linear0's weight
    transposed (the recipe's first step) gets main passing it transposed: it measures
    and matches numpy, as do the four stages."""
    from app.web.model import ModelState, model_stage
    app, c = client
    html = _html(c.get("/model/mlp?batch=1&fused=0"))
    assert "<code>W(128, 784)</code>" in html and 'id="recipe-note"' in html
    assert "x @ W.T is scheduled as x @ W" in html
    token = _relayout_token(model_stage("mlp", 1, "unscheduled"), "linear0",
                            "lambda j, k: (k, j)")
    url = f"/model/mlp?batch=1&fused=0&t.linear0={token}"
    assert c.get(url).status_code == 200
    current, _ = ModelState.from_request("mlp", {"batch": "1", "fused": "0",
                                                 "t.linear0": token}).scheduled()
    assert tuple(current["linear0"].buffer_params[1].shape) == (784, 128)
    murl = url.replace("/model/mlp?", "/model/mlp/measure?")
    c.get(murl)
    drain(app)
    assert _html(c.get(murl)).count("<td>yes</td>") == 5


def test_a_trace_relaying_a_computed_weight_is_refused_with_a_sentence(client):
    """After LowerToTensorIR alone the weights are main's parameters, transposed at run
    time: a trace storing matmul's B in another layout cannot be given that, and says so."""
    from app.web.model import ModelState
    app, c = client
    base = ModelState.from_request("mlp", {"batch": "1", "fused": "0",
                                           "passes": "LowerToTensorIR"}).base()
    token = _relayout_token(base, "matmul", "lambda k, j: (j, k)", "T_matmul")
    r = c.get(f"/model/mlp?batch=1&fused=0&passes=LowerToTensorIR&t.matmul={token}")
    assert r.status_code == 400
    assert "not a constant weight" in _html(r) and "cache_read" in _html(r)


def test_a_recipe_trace_opens_in_the_explorer_on_the_weights_as_stored_and_comes_back(client):
    """A link whose linear1 carries the recipe (its first step stores W transposed): the
    function's explorer link opens the function as the model stores it (W (128, 10)) with
    the rest of the recipe, and does not replay the layout step the explorer refuses;
    pasting an explorer link of that program back puts the layout steps first again."""
    from app.web.model import ModelState, get_model, model_stage
    from engine import relax
    from engine.models.layouts import constant_params
    from engine.models.mlp import forward
    from engine.models.schedules import default_schedule
    from engine.schedule import Trace
    app, c = client
    base = model_stage("mlp", 1, "fused")
    recipe = default_schedule(IRModule((("linear1", base["linear1"]),)), "linear1",
                              weights=constant_params(base, "linear1")).trace
    url = f"/model/mlp?batch=1&fused=1&t.linear1={recipe.encode()}"
    html = _html(c.get(url))
    link = re.search(r'id="fn-linear1".*?class="fname" href="([^"]+)"', html, re.S).group(1)
    link = link.replace("&amp;", "&")
    q = parse_qs(urlparse(link).query)
    rest = Trace.decode(q["t"][0])
    assert len(rest) == len(recipe) - 2 and "TransformLayout" not in [i.kind for i in rest]
    page = c.get(link)
    assert page.status_code == 200 and "changes the layout" not in _html(page)
    assert "(128, 10)" in _html(page)
    # the explorer's link of the stored program, one step shorter, pasted back
    pasted = link.replace(q["t"][0], rest.truncate(len(rest) - 1).encode())
    r = c.post("/model/mlp/apply", data={"batch": "1", "fused": "1", "func": "linear1",
                                         "t.linear1": recipe.encode(),
                                         "trace": "http://127.0.0.1:5000" + pasted})
    assert r.status_code == 303, _html(r)
    token = parse_qs(urlparse(r.headers["Location"]).query)["t.linear1"][0]
    kinds = [i.kind for i in Trace.decode(token).insts]
    assert kinds[:2] == ["GetBlock", "TransformLayout"] and len(kinds) == len(recipe) - 1
    state = ModelState.from_request("mlp", {"batch": "1", "fused": "1", "t.linear1": token})
    current, _ = state.scheduled()
    assert tuple(current["linear1"].buffer_params[1].shape) == (128, 10)
    x = np.random.default_rng(0).standard_normal((1, 784)).astype("float32")
    got = relax.VirtualMachine(relax.build(current, target="llvm"))["main"](x)
    np.testing.assert_allclose(np.asarray(got), forward(get_model("mlp").extra, x),
                               rtol=1e-4, atol=1e-4)
