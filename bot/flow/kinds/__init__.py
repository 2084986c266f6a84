"""The kinds of job, by name: what a request asks to be drawn, and the shape of its answer.

Adding a kind is one module in this folder (a :class:`~bot.flow.kinds.base.Kind`
with its name and the answers that differ from a photo's) and one line in registry.py;
the runner, admission and results ask the planner and never test for a kind.
"""
