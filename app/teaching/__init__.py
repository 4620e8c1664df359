"""Teaching: the pages built on the explorer for learning and presenting.

==========================  =============================================================
``lessons.py``              the lesson player (narrative beside the explorer's panes,
                            "apply for me" / "try it yourself" with a check)
``challenges.py``           challenges and the check of a learner's link
``compare.py``              two states side by side, their measurements overlaid
``presenter.py``            presenter mode (and the ``present=1`` flag of every page)
==========================  =============================================================

Each module is a Flask blueprint of its own; they use the web layer (:mod:`app.web`: the
session, the panes, the toolbar) and the measurement service through it.
"""
