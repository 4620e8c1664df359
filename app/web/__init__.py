"""The web layer: HTTP routes, the request's state, and one view module per pane.

==========================  =============================================================
``routes.py``               the explorer's routes (thin: decode, call a view, render)
``session.py``              the URL is the session: workload + sizes + trace token + cursor
``selection.py``            the loop/block tree of a program and the ids that select a node
``toolbar.py``              the primitives a selection offers, and applying a toolbar form
``gallery.py``              the gallery page
``explorer.py``             the explorer page: every pane's context for one state
``panes/program.py``        program text (clickable loops and blocks) and the step's diff
``panes/diagram.py``        the SVG loop diagram (with cache footprints)
``panes/trace.py``          the steps and the presets menu
``panes/measurement.py``    runtime/GFLOP/s per step and the roofline tab
``panes/cache.py``          simulated cache misses and the access-pattern view
``panes/code.py``           LLVM IR and assembly
``measuring.py``            asking the measurement service within a time budget; prefetch
``plots.py``                plotly figures (JSON for plotly.js, served locally)
``services.py``             the measurement service, the store and the limits of a request
``security.py``             CSP and security headers, same-origin POSTs, classroom binding
==========================  =============================================================

The web layer never compiles or runs generated code: everything measured comes from
:mod:`app.service` (through :class:`~app.service.measurer.StepMeasurer`).
"""
