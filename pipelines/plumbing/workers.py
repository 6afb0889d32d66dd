"""Where a pipeline's workers run: on this machine (they see its disk) or elsewhere.

A path on this machine is useless to workers elsewhere: each would read a file it does not
have, or write to its own disk and lose the output. The launcher asks `workers_elsewhere`
before anything starts and refuses such paths in one line (`StageRun.require_shared`).

Dataflow's workers are always elsewhere. A portable runner's are where its SDK environment
puts them: LOOPBACK runs them in the launching process; DOCKER in containers, which see
none of this machine's files (Beam mounts none); EXTERNAL in the worker pool at
`--environment_config`, on this machine when that address is; PROCESS on the machines of
the runner's cluster, this one when the job server or cluster is here.
"""

from __future__ import annotations

import ipaddress
import json
import re
import socket

from apache_beam.options.pipeline_options import (
    FlinkRunnerOptions,
    PipelineOptions,
    PortableOptions,
    SparkRunnerOptions,
    StandardOptions,
)

# Runners whose workers run on machines of their own, whatever the options.
ALWAYS_ELSEWHERE = ("DataflowRunner", "TestDataflowRunner")

# Runners that start SDK environments (the rest, Beam's direct and local runners, run the
# pipeline in the launching process).
PORTABLE = ("PortableRunner", "FlinkRunner", "SparkRunner", "PrismRunner")

# Flink's names for a cluster that Beam starts on this machine (its MAGIC_HOST_NAMES), and
# Spark's pattern for a local master (its LOCAL_MASTER_PATTERN).
FLINK_HERE = ("[local]", "[auto]")
SPARK_HERE = r"^local(\[.+\])?$"


def workers_elsewhere(options: PipelineOptions) -> str | None:
    """Who cannot reach this machine's files, in words ("DataflowRunner's workers"), or
    None when the pipeline's workers run here."""
    runner = str(options.view_as(StandardOptions).runner or "").rsplit(".", 1)[-1]
    if runner in ALWAYS_ELSEWHERE:
        return f"{runner}'s workers"
    if runner not in PORTABLE:
        return None
    environment = _environment_type(runner, options)
    if environment == "LOOPBACK":
        return None
    if environment == "DOCKER":
        return f"{runner}'s workers in Docker containers"
    if environment == "EXTERNAL":
        address = _external_address(options.view_as(PortableOptions).environment_config)
        return None if _is_here(address) else f"the worker pool at {address}"
    # PROCESS, or an environment by URN: started where the runner's cluster runs.
    cluster = _cluster(runner, options)
    return None if _is_here(cluster) else f"{runner}'s workers at {cluster}"


def _environment_type(runner: str, options: PipelineOptions) -> str:
    """--environment_type, or the one `runner` picks without it (Beam's default_environment:
    DOCKER, but LOOPBACK for Prism and for Flink and Spark clusters started here)."""
    portable = options.view_as(PortableOptions)
    if portable.environment_type:
        return str(portable.environment_type).upper()
    if portable.output_executable_path:
        return "DOCKER"
    return "LOOPBACK" if _started_here(runner, options) else "DOCKER"


def _started_here(runner: str, options: PipelineOptions) -> bool:
    """Whether Beam starts `runner`'s cluster on this machine: Prism's always, Flink's for
    its magic master names, Spark's for a local master."""
    if runner == "PrismRunner":
        return True
    if runner == "FlinkRunner":
        return options.view_as(FlinkRunnerOptions).flink_master in FLINK_HERE
    if runner == "SparkRunner":
        master = options.view_as(SparkRunnerOptions).spark_master_url or ""
        return re.match(SPARK_HERE, master) is not None
    return False


def _external_address(config: str | None) -> str:
    """The worker pool's host:port: --environment_config is the address or a JSON object
    with it under "url"."""
    config = (config or "").strip()
    if config.startswith("{"):
        try:
            return str(json.loads(config).get("url", ""))
        except (ValueError, AttributeError):
            return config
    return config


def _cluster(runner: str, options: PipelineOptions) -> str:
    """Where `runner`'s job runs: its job server, Flink master or Spark master."""
    if _started_here(runner, options):
        return "localhost"
    if runner == "FlinkRunner":
        return str(options.view_as(FlinkRunnerOptions).flink_master)
    if runner == "SparkRunner":
        return str(options.view_as(SparkRunnerOptions).spark_master_url or "")
    endpoint = options.view_as(PortableOptions).job_endpoint or "embed"
    return "localhost" if endpoint == "embed" else endpoint


def _is_here(address: str) -> bool:
    """Whether host[:port] (or a URL) names this machine: a loopback address or its name."""
    host = re.sub(r"^[a-z][a-z0-9+.-]*://", "", address.strip(), flags=re.I).split("/")[0]
    if host.startswith("["):
        host = host[1:].split("]")[0]
    elif host.count(":") == 1:
        host = host.split(":")[0]
    if not host:
        return False
    if host == "localhost" or host in (socket.gethostname(), socket.getfqdn()):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False
