#!/usr/bin/env bash
# A real multi-node Ecdysis cluster on this machine, every node its own container on a user-defined Docker network:
#   - ecdysis-ray-head       Ray head (no CPUs for rollouts; the CLI and the driver actor run here)
#   - ecdysis-ray-worker-N   Ray workers offering `rollout` units (rollouts run only here)
#   - ecdysis-s3             an S3-compatible server (moto) in its own container, bucket `ecdysis-runs`
#   - a registry             Debian's docker-registry on 127.0.0.1 (harness images; the daemon pulls from loopback)
# Nodes share no disk with each other or the host: bundles travel through S3, harness images through the registry.
#
#   bash cluster/local-cluster.sh up        # build what is missing (images, wheels), start everything, wait for it
#   bash cluster/local-cluster.sh status    # containers, Ray nodes, registry and S3 health
#   bash cluster/local-cluster.sh run CMD…  # run a command on the head, e.g. `ecdysis train /jobs/x.yaml …`
#   bash cluster/local-cluster.sh llm-server LATENCY_S [MODEL=S…]   # (re)start `ecdysis-llm`, an OpenAI-compatible
#                                           # latency server with τ²'s scripted replies at http://<subnet>.30:8000/v1
#                                           # (configs name `api_key_env: ECDYSIS_CLUSTER_LLM_KEY` for it)
#   bash cluster/local-cluster.sh down      # remove every container, the network, the registry and its images
#
# Settings (environment):
#   ECDYSIS_CLUSTER_WORKERS=2        worker containers
#   ECDYSIS_CLUSTER_WORKER_CPUS=1    Ray CPUs per worker (the pool starts one rollout worker actor per CPU)
#   ECDYSIS_CLUSTER_SANDBOX=docker   docker: workers mount the host's Docker socket and start each rollout sandbox as a
#                                    sibling container (full container isolation; the socket gives the node the
#                                    daemon's power, so only trusted Ecdysis code runs there). process: no socket;
#                                    the process sandbox runs inside the worker container (no daemon to trust, but
#                                    its allow-list isolation needs privileges a container lacks: `weak` only).
#   ECDYSIS_CLUSTER_SUBNET=172.31.250   the network's /24 (head .10, workers .11+, S3 .20)
#   ECDYSIS_REGISTRY_PORT=5000       the registry's loopback port
#   ECDYSIS_CLUSTER_JOBS=DIR         mounted read-only at /jobs on the head (run configs); default: the state folder's
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cache=${ECDYSIS_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/ecdysis}
state=$cache/cluster
network=ecdysis-cluster
subnet=${ECDYSIS_CLUSTER_SUBNET:-172.31.250}
workers=${ECDYSIS_CLUSTER_WORKERS:-2}
worker_cpus=${ECDYSIS_CLUSTER_WORKER_CPUS:-1}
sandbox=${ECDYSIS_CLUSTER_SANDBOX:-docker}
registry_port=${ECDYSIS_REGISTRY_PORT:-5000}
jobs=${ECDYSIS_CLUSTER_JOBS:-$state/jobs}
node_image=${ECDYSIS_IMAGE:-ecdysis:local}
s3_image=ecdysis-s3:local
head=ecdysis-ray-head
head_ip=$subnet.10
s3_ip=$subnet.20
python=${PYTHON:-$( [[ -x $repo/.venv/bin/python ]] && echo "$repo/.venv/bin/python" || echo python3 )}

say() { echo "local-cluster: $*"; }
die() { echo "local-cluster: error: $*" >&2; exit 1; }
worker_name() { echo "ecdysis-ray-worker-$1"; }

build_s3_image() {
    docker image inspect "$s3_image" >/dev/null 2>&1 && return 0
    local context version
    context=$(mktemp -d)
    version=$("$python" -c 'import importlib.metadata as m; print(m.version("moto"))')
    say "building $s3_image (moto $version, wheels built here)"
    "$python" -m pip wheel --quiet --disable-pip-version-check --wheel-dir "$context/wheels" "moto[server]==$version" \
        pip async-timeout
    cat >"$context/Dockerfile" <<'DOCKERFILE'
ARG BASE_IMAGE
FROM ${BASE_IMAGE} AS install
COPY wheels /wheels
RUN python3 -m venv --without-pip /opt/venv && /opt/venv/bin/python "$(ls /wheels/pip-*.whl)/pip" install \
    --no-index --no-cache-dir --disable-pip-version-check --find-links /wheels "moto[server]"
FROM ${BASE_IMAGE}
COPY --from=install /opt/venv /opt/venv
LABEL ecdysis=1 ecdysis.role=s3
USER 65532:65532
ENTRYPOINT ["/opt/venv/bin/python", "-m", "moto.server", "-H", "0.0.0.0", "-p", "5000"]
DOCKERFILE
    DOCKER_BUILDKIT=0 docker build -q --build-arg BASE_IMAGE=ecdysis-sandbox-rootfs:local -t "$s3_image" \
        "$context" >/dev/null
    docker image prune -f --filter dangling=true >/dev/null 2>&1 || true
    rm -rf "$context"
}

registry_up() {
    local pidfile=$state/registry/pid
    if [[ -s $pidfile ]] && kill -0 "$(cat "$pidfile")" 2>/dev/null; then return 0; fi
    command -v docker-registry >/dev/null || ECDYSIS_HOST_PACKAGES=docker-registry bash "$repo/sandbox/ensure-host-packages.sh"
    command -v docker-registry >/dev/null || die "docker-registry is not installed (apt-get install docker-registry)"
    mkdir -p "$state/registry/data"
    cat >"$state/registry/config.yml" <<EOF
version: 0.1
log: {level: warn}
storage:
  filesystem: {rootdirectory: $state/registry/data}
  delete: {enabled: true}
http:
  addr: 127.0.0.1:$registry_port
EOF
    nohup docker-registry serve "$state/registry/config.yml" >"$state/registry/log" 2>&1 &
    echo $! >"$pidfile"
    for _ in $(seq 50); do
        "$python" -c "import urllib.request; urllib.request.urlopen('http://127.0.0.1:$registry_port/v2/', timeout=1)" \
            2>/dev/null && return 0
        sleep 0.2
    done
    die "the registry did not answer on 127.0.0.1:$registry_port (log: $state/registry/log)"
}

node_env() {
    # Everything a node needs, written once per `up`; the token never appears on a command line.
    [[ -s $state/ray-token ]] || "$python" -c 'import secrets; print(secrets.token_hex(32))' >"$state/ray-token"
    chmod 600 "$state/ray-token"
    cat >"$state/node.env" <<EOF
RAY_AUTH_MODE=token
RAY_AUTH_TOKEN=$(cat "$state/ray-token")
RAY_USAGE_STATS_ENABLED=0
RAY_worker_niceness=0
ECDYSIS_S3_ENDPOINT_URL=http://$s3_ip:5000
AWS_ACCESS_KEY_ID=testing
AWS_SECRET_ACCESS_KEY=testing
AWS_DEFAULT_REGION=us-east-1
ECDYSIS_CLUSTER_LLM_KEY=latency-server-needs-no-key
EOF
    chmod 600 "$state/node.env"
}

running() { [[ $(docker container inspect -f '{{.State.Running}}' "$1" 2>/dev/null) == true ]]; }

start_node() {  # name ip extra-docker-args… -- ray-start-args…
    local name=$1 ip=$2
    shift 2
    # A running node of the current image stays; one that was killed, stopped or built from an older image starts
    # afresh.
    if running "$name" && [[ $(docker container inspect -f '{{.Image}}' "$name") == \
            $(docker image inspect -f '{{.Id}}' "$node_image") ]]; then
        return 0
    fi
    docker rm -f "$name" >/dev/null 2>&1 || true
    local docker_args=()
    while [[ $1 != -- ]]; do docker_args+=("$1"); shift; done
    shift
    if [[ $sandbox == docker ]]; then
        docker_args+=(-v /var/run/docker.sock:/var/run/docker.sock --group-add "$(stat -c %g /var/run/docker.sock)")
    fi
    docker run -d --name "$name" --hostname "$name" --network "$network" --ip "$ip" --env-file "$state/node.env" \
        --shm-size 512m --label ecdysis.cluster=local "${docker_args[@]}" --entrypoint ray "$node_image" \
        start --block --node-ip-address "$ip" --object-store-memory 200000000 --disable-usage-stats "$@" >/dev/null
}

up() {
    command -v docker >/dev/null || die "no docker client"
    bash "$repo/sandbox/ensure-docker.sh" >/dev/null
    bash "$repo/cluster/build-image.sh"
    build_s3_image
    mkdir -p "$state" "$jobs"
    node_env
    registry_up
    docker network inspect "$network" >/dev/null 2>&1 \
        || docker network create --subnet "$subnet.0/24" --label ecdysis.cluster=local "$network" >/dev/null
    if ! running ecdysis-s3; then
        docker rm -f ecdysis-s3 >/dev/null 2>&1 || true
        docker run -d --name ecdysis-s3 --hostname ecdysis-s3 --network "$network" --ip "$s3_ip" \
            --label ecdysis.cluster=local "$s3_image" >/dev/null
    fi
    start_node "$head" "$head_ip" -v "$jobs:/jobs:ro" -- --head --port 6379 --num-cpus 0 --include-dashboard false
    for i in $(seq 1 "$workers"); do
        start_node "$(worker_name "$i")" "$subnet.$((10 + i))" -- --address "$head_ip:6379" --num-cpus "$worker_cpus" \
            --resources '{"rollout": 4}'
    done
    wait_ready
    status
}

wait_ready() {
    local want=$((workers + 1))
    say "waiting for S3 and $want Ray nodes"
    for _ in $(seq 120); do
        if docker exec "$head" python -c "
import boto3, os, ray, sys
s3 = boto3.client('s3', endpoint_url=os.environ['ECDYSIS_S3_ENDPOINT_URL'])
if 'ecdysis-runs' not in [b['Name'] for b in s3.list_buckets()['Buckets']]:
    s3.create_bucket(Bucket='ecdysis-runs')
ray.init(address='auto', logging_level='ERROR')
sys.exit(0 if sum(n['Alive'] for n in ray.nodes()) >= $want else 1)
" >/dev/null 2>&1; then
            return 0
        fi
        sleep 1
    done
    docker logs --tail 30 "$head" >&2 || true
    die "the cluster did not come up with $want nodes within 2 minutes"
}

status() {
    docker ps -a --filter label=ecdysis.cluster=local --format '{{.Names}}\t{{.Status}}\t{{.Image}}'
    local pidfile=$state/registry/pid
    if [[ -s $pidfile ]] && kill -0 "$(cat "$pidfile")" 2>/dev/null; then
        say "registry: 127.0.0.1:$registry_port (pid $(cat "$pidfile"))"
    else
        say "registry: not running"
    fi
    if docker container inspect "$head" >/dev/null 2>&1; then
        docker exec "$head" ray status 2>/dev/null | sed -n '/Active:/,/Pending:/p' || true
    fi
}

down() {
    # Rollout sandboxes the workers started are siblings on the host daemon: remove them with their nodes.
    local names sandboxes
    names=$(docker ps -a --filter label=ecdysis.cluster=local --format '{{.Names}}' | tr '\n' ' ')
    sandboxes=$(docker ps -a --filter label=ecdysis.owner --format '{{.ID}} {{.Label "ecdysis.owner"}}' \
        | awk '$2 ~ /^ecdysis-ray-/ {print $1}')
    [[ -z ${sandboxes// /} ]] || docker rm -f $sandboxes >/dev/null 2>&1 || true
    [[ -z ${names// /} ]] || docker rm -f $names >/dev/null 2>&1 || true
    docker network rm "$network" >/dev/null 2>&1 || true
    local pidfile=$state/registry/pid
    if [[ -s $pidfile ]]; then
        kill "$(cat "$pidfile")" 2>/dev/null || true
        rm -f "$pidfile"
    fi
    rm -rf "$state/registry/data"
    # Harness images pulled from (or pushed to) this registry go with it.
    local images
    images=$(docker images --format '{{.Repository}}@{{.Digest}} {{.Repository}}:{{.Tag}}' \
        | awk -v r="127.0.0.1:$registry_port/" 'index($1, r) == 1 {print $2}' | grep -v ':<none>$' || true)
    [[ -z $images ]] || docker rmi -f $images >/dev/null 2>&1 || true
    images=$(docker images --filter "reference=127.0.0.1:$registry_port/*" -q)
    [[ -z $images ]] || docker rmi -f $images >/dev/null 2>&1 || true
    say "down"
}

llm_server() {  # latency [model=seconds…]
    local latency=${1:?usage: llm-server LATENCY_S [MODEL=S…]} per_model=()
    shift
    for item in "$@"; do per_model+=(--model-latency "$item"); done
    docker rm -f ecdysis-llm >/dev/null 2>&1 || true
    docker run -d --name ecdysis-llm --hostname ecdysis-llm --network "$network" --ip "$subnet.30" \
        --label ecdysis.cluster=local --entrypoint python "$node_image" -m ecdysis.testing.latency --host 0.0.0.0 \
        --port 8000 --latency "$latency" "${per_model[@]}" >/dev/null
    for _ in $(seq 60); do
        docker exec ecdysis-llm python -c "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8000/stats')" \
            >/dev/null 2>&1 && { say "llm-server: http://$subnet.30:8000/v1 (latency ${latency}s)"; return 0; }
        sleep 1
    done
    docker logs --tail 20 ecdysis-llm >&2
    die "the latency server did not answer"
}

case ${1:-} in
    up) up ;;
    llm-server) shift; llm_server "$@" ;;
    down) down ;;
    status) status ;;
    run) shift; exec docker exec -i "$head" "$@" ;;
    *) echo "usage: $0 up|down|status|run CMD...|llm-server LATENCY_S [MODEL=S...]" >&2; exit 2 ;;
esac
