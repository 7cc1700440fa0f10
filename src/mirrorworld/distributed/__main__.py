"""``python -m mirrorworld.distributed``: the scale-out benchmark (:mod:`mirrorworld.distributed.bench`)."""

from mirrorworld.distributed.bench import main

raise SystemExit(main())
