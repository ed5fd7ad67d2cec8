# shellcheck shell=bash
# Sourced by the load benchmarks (bench/load/run_load.sh, bench/load/million.sh,
# bench/hierarchy/run_hierarchy.sh): the part of the server config every load run shares.
#
# load_server_config MAX_IDENTITIES [ARCHITECTURE]: prints the settings of a load run's server: the
# round (overcommit 1.0, one local step, the model ARCHITECTURE, default softmax, a 120 s deadline,
# heartbeats every 2 s), no
# test-set evaluation, and admission fit for simulated devices: they register from this host,
# unprovisioned, so trust on first use (loopback only) with no registration rate limits and no
# bound on never-proven identities, and room for MAX_IDENTITIES identities. The caller adds the
# listen address, K, min_online_clients, num_rounds and its pacing.
load_server_config() {
  local max_identities=$1 architecture=${2:-softmax}
  cat <<CFG
round_deadline_s: 120
heartbeat_interval_ms: 2000
missed_heartbeats: 5
selection { overcommit: 1.0 }
training { local_steps: 1 batch_size: 32 }
model { architecture: "$architecture" }
security { max_new_identities_per_peer_per_minute: -1 max_new_identities_per_minute: -1
           allow_trust_on_first_use: true max_unproven_task_fraction: 1
           max_unproven_identity_fraction: 1 max_identities: $max_identities }
# No test-set evaluation: the figures are the coordination cost alone.
eval { test_images_path: "/nonexistent" test_labels_path: "/nonexistent" }
CFG
}
