"""Deploy models on the running NDIF controller: ``python deploy.py KEY [SECONDS] ...``.

Each key is deployed pinned, in float32; a number after a key gives that deployment an execution time-out
(the time-out a remote user meets). Waits until every replica has loaded (ndif's own ``ndif deploy`` waits
the same way); a replica that failed to load raises its own error here.
"""

import sys

import ray
from ndif.cli.lib.models import wait_for_replica_ready
from ndif.common.providers.ray import get_controller_actor_handle
from ndif.common.schema.controller import DeploymentConfig


def configs(args: list[str]) -> dict:
    out: dict = {}
    for arg in args:
        if out and arg.replace(".", "", 1).isdigit():
            out[list(out)[-1]].execution_timeout_seconds = float(arg)
        else:
            out[arg] = DeploymentConfig(pinned=True, dtype="float32")
    return out


def main(args: list[str]) -> None:
    asked = configs(args)
    ray.init(logging_level="error", namespace="NDIF")  # RAY_ADDRESS: the head's Ray client address
    response = ray.get(get_controller_actor_handle().deploy.remote(asked))
    for key, result in response.results.items():
        if result.error:
            sys.exit(f"{key} was not deployed: {result.error}")
        for replica in result.replicas:
            wait_for_replica_ready(key, replica)
        print(f"deployed {key}")


if __name__ == "__main__":
    main(sys.argv[1:])
