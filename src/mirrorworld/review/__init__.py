"""Human review of trajectories and calibration of the verifier against it.

Reviewers grade sampled episodes in a web app (:mod:`~mirrorworld.review.app`)
without seeing the verifier's verdict until they have graded; their grades
live in a review database (:mod:`~mirrorworld.review.store`) filled by
stratified sampling with overlap and gold honeypots
(:mod:`~mirrorworld.review.queue`). From it come the agreement report
(:mod:`~mirrorworld.review.stats`, coefficients in
:mod:`~mirrorworld.review.agreement`), reviewer quality and auto-pause
(:mod:`~mirrorworld.review.quality`), drift alarms
(:mod:`~mirrorworld.review.drift`) and, from adjudicated disagreements,
verifier regression cases (:mod:`~mirrorworld.review.regressions`). What a
reviewer reads — the conversation and the state diff replayed from the
recorded messages — comes from :mod:`~mirrorworld.review.episode`; the
``review`` command from :mod:`~mirrorworld.review.cli`; run files, an
in-thread server and a scripted reviewer for tests from
:mod:`~mirrorworld.review.testing`.

The web app needs the ``review`` extra (Starlette, uvicorn, Jinja2,
itsdangerous); the statistics need scikit-learn, ``krippendorff`` and SciPy.
Import the submodules you use: this package imports nothing heavy itself.
"""

from __future__ import annotations

__all__: list[str] = []
