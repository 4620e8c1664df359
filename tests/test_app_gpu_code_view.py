"""The CUDA C view of a GPU step shows the kernels first, TVM's header (macros and type
names, first in the file) folded below them: a learner opening the tab sees the kernel."""
from __future__ import annotations

import re
from urllib.parse import parse_qs, urlsplit

from inline_service import drain, make_test_app

HX = {"HX-Request": "true"}


def test_the_cuda_view_opens_on_the_kernel():
    app = make_test_app()
    c = app.test_client()
    q = {"target": "cuda-h100-sxm", "n": "256"}
    for sel, prim, args in (("L/vector_add/0/C", "split", {"factors": "None, 64"}),
                            ("L/vector_add/0/C", "bind", {"thread_axis": "blockIdx.x"}),
                            ("L/vector_add/1/C", "bind", {"thread_axis": "threadIdx.x"})):
        r = c.post("/explore/vector_add/apply", data=dict(q, sel=sel, primitive=prim, **args),
                   headers=HX)
        q = {k: v[0] for k, v in parse_qs(urlsplit(r.headers["HX-Push-Url"]).query).items()}
    url = "/explore/vector_add/code"
    for _ in range(100):
        body = c.get(url, query_string=dict(q, kind="cuda")).get_data(as_text=True)
        if "loading" not in body:
            break
        drain(app)
    pres = re.findall(r"<pre[^>]*><code>(.*?)</code></pre>", body, re.S)
    assert len(pres) == 2, body[:1500]
    kernel, header = pres
    assert kernel.startswith("extern &#34;C&#34; __global__") and "threadIdx.x" in kernel
    assert "__CUDACC_VER_MAJOR__" in header and "__global__" not in header
    assert re.search(r"<details class=\"code-header\"><summary>TVM's header, first in the "
                     r"file \(\d+ lines", body)
