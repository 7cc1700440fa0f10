"""Scale-out on Ray: episodes over a pool of actors, and a vector environment whose environments live on them.

Ray is an optional extra (``pip install 'mirrorworld[ray]'``); importing this
package does not import it, and using it without Ray is one readable
:class:`~mirrorworld.errors.MirrorworldError`.

* :func:`run_on_ray` / :class:`EpisodePool` (:mod:`~mirrorworld.distributed.pool`):
  ``mirrorworld run --ray [ADDRESS] --workers N``. A planned run is played in
  chunks by actors that each host a world rebuilt from its spec, and merged
  back in plan order: the same records, verdicts and state hashes as a local
  run. A lost worker's episodes are infrastructure failures, never scores.
* :class:`RayVectorEnv` with :class:`EnvFactory` (:mod:`~mirrorworld.distributed.vector`):
  a ``gymnasium.vector.VectorEnv`` that behaves as ``SyncVectorEnv`` over the
  same environments, stepping each actor's slice in one call.
* :func:`connected` (:mod:`~mirrorworld.distributed.cluster`): a local Ray, or
  a running cluster by its address.
* :func:`scaling` (:mod:`~mirrorworld.distributed.bench`): episodes/s with N
  workers against one.

RLlib needs none of this: its env runners are Ray actors that build their
environments from the registered env id (``register_env``), so they rebuild
the world on whichever node of the same cluster they land
(``docs/scale-out.md``).
"""

from mirrorworld.distributed.bench import scaling
from mirrorworld.distributed.cluster import connected, require_ray
from mirrorworld.distributed.pool import EpisodePool, run_on_ray
from mirrorworld.distributed.vector import EnvFactory, RayVectorEnv
from mirrorworld.distributed.worker import EpisodeWorker, VectorWorker

__all__ = [
    "EnvFactory",
    "EpisodePool",
    "EpisodeWorker",
    "RayVectorEnv",
    "VectorWorker",
    "connected",
    "require_ray",
    "run_on_ray",
    "scaling",
]
