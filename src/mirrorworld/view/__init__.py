"""The run viewer: ``mirrorworld view RUN...`` serves run files read-only in the browser.

* :mod:`mirrorworld.view.runs`: what a run file gives the viewer (one row per
  episode, the figures, the filters, what makes an episode *flagged*); no
  web dependency;
* :mod:`mirrorworld.view.app`: the Starlette app (needs the ``review`` extra),
  whose episode page is the review app's episode rendering
  (:mod:`mirrorworld.review.episode`, :mod:`mirrorworld.review.templates`);
* :mod:`mirrorworld.view.cli`: the command.

Nothing is imported here, so that building the command line (which imports
:mod:`mirrorworld.view.cli`) stays light. See ``docs/view.md``.
"""

__all__: list[str] = []
