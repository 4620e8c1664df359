"""Guided lessons: a workload, and ordered steps that each apply one schedule primitive.

Lessons ship as one JSON file each in ``engine/lessons/data/`` (format documented in
``engine/lessons/FORMAT.md``). Public API::

    from engine import lessons
    lessons.names()                     # ['01_tensorir_mm_relu', ...] in teaching order
    les = lessons.get("01_tensorir_mm_relu")
    les.title, les.steps[0].text        # narrative (markdown-light; see lessons.markup)
    sch = les.schedule_at(2)            # a fresh Schedule with the first 2 steps applied
    ok, msg = les.check_step(2, learner_schedule)   # did the learner do step 2 right?

Steps are numbered from 0: step ``k`` turns ``schedule_at(k)`` into ``schedule_at(k + 1)``.
A step without an action is narrative only (it leaves the program unchanged).
"""
from __future__ import annotations

from engine.script.nest import first_difference, loop_nest, match_nest, nest_lines, nest_text

from .actions import (PRIMITIVES, ActionError, action_python, apply_action, describe_action,
                      validate_action)
from .lesson import (DATA_DIR, FORMAT, GPU_TARGETS, LOOK_AT, VERSION, Lesson, LessonError,
                     Question, Step, all_lessons, get, load, names, parse_lesson)
from .markup import to_html, to_text

__all__ = ["Lesson", "Step", "Question", "LessonError", "names", "get", "all_lessons", "load",
           "parse_lesson", "DATA_DIR", "LOOK_AT", "PRIMITIVES", "ActionError", "apply_action",
           "action_python", "describe_action", "validate_action", "to_html", "to_text",
           "loop_nest", "nest_lines", "nest_text", "match_nest", "first_difference",
           "FORMAT", "VERSION", "GPU_TARGETS"]
