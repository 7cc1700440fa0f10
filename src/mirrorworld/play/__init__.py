"""A person as the agent: ``mirrorworld play`` plays one task in the terminal, graded and saved as a run.

* :mod:`mirrorworld.play.human`: the prompt and its commands (``TOOL {json}``,
  ``tools``, ``schema``, ``policy``, ``diff``, ``help``, ``quit``), what is
  printed between them (inert), and :class:`~mirrorworld.play.human.HumanAgent`,
  an agent the runner plays like any other;
* :mod:`mirrorworld.play.team`: the person in one seat of a team world, the
  other roles played by the world's default team;
* :mod:`mirrorworld.play.cli`: the command.

Nothing is imported here, so that building the command line (which imports
:mod:`mirrorworld.play.cli`) stays light. See ``docs/play.md``.
"""

__all__: list[str] = []
