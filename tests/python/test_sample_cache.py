"""The Python SDK's sample-cache path: fedsched.Client(..., samples=[encoded samples]).

The client keeps the encoded samples in the importance-aware sample cache of client/cache
(under config.state_dir); each round the SDK picks the sample ids from the server's cache plan
and the Python trainer reads the bytes through Trainer.read_sample (served by the cache). The
test checks that the ids the trainer gets are the cache's choice (batch x steps ids of this
client, repeats allowed), that read_sample returns exactly the encoded samples, that it refuses
outside train, and that training through the cache learns and reports cache hits.
"""
import numpy as np
import pytest

import fedsched
from fedsched_testing import Server, run_clients
from test_sdk import TEST_IMAGES, TEST_LABELS, NumpySoftmax, two_client_run

BATCH, STEPS = 20, 15


def decode(sample):
    """(pixels [784] float32 in [0, 1], label) of an encoded sample (models/samples.h)."""
    raw = np.frombuffer(sample, np.uint8)
    return raw[1:].astype(np.float32) / 255.0, int(raw[0])


class CachedSoftmax(NumpySoftmax):
    """NumpySoftmax whose training samples come through the SDK's sample cache."""

    def __init__(self, encoded, eval_x, eval_y):
        super().__init__(None, None, eval_x, eval_y)
        self.encoded = encoded
        self.rounds_ids = []
        self.mismatches = 0

    def train(self, weights, sample_ids):
        self.rounds_ids.append(np.array(sample_ids))
        x = np.empty((len(sample_ids), 784), np.float32)
        y = np.empty(len(sample_ids), np.int64)
        for k, i in enumerate(sample_ids):
            sample = self.read_sample(int(i))
            self.mismatches += sample != self.encoded[i]
            x[k], y[k] = decode(sample)
        self.x, self.y = x, y
        ids = np.arange(len(sample_ids), dtype=np.int64)
        ids.flags.writeable = False  # as the SDK's views are
        return super().train(weights, ids)


def test_python_trainer_trains_through_the_sample_cache(tmp_path):
    server = Server(tmp_path, two_client_run(
        tmp_path, seed=1, local_steps=STEPS, batch_size=BATCH,
        extra="cache { policy: CACHE_POLICY_IMPORTANCE capacity_fraction: 0.5 }"))
    clients, trainers = [], []
    try:
        server.wait_listening()
        test_x, test_y = fedsched.load_partition(0, 1, images=TEST_IMAGES, labels=TEST_LABELS)
        for i in range(2):
            x, y = fedsched.load_partition(i, 20)
            encoded = [fedsched.encode_sample(x[k], int(y[k])) for k in range(len(y))]
            trainer = CachedSoftmax(encoded, test_x[i * 500:(i + 1) * 500],
                                    test_y[i * 500:(i + 1) * 500].astype(np.int64))
            with pytest.raises(RuntimeError, match="only inside train"):
                trainer.read_sample(0)
            server.provision(tmp_path / f"state-{i}", f"cached-{i}")
            config = (f'server_address: "{server.address}" identity: "cached-{i}" '
                      f'state_dir: "{tmp_path / f"state-{i}"}" seed: {7 + i}')
            trainers.append(trainer)
            clients.append(fedsched.Client(config, trainer, samples=encoded))

        run_clients(clients, server)
    finally:
        for c in clients:
            c.stop()
        server.kill()
    for trainer in trainers:
        assert trainer.mismatches == 0  # read_sample served exactly the encoded samples
        assert len(trainer.rounds_ids) >= 3
        for ids in trainer.rounds_ids:
            # The cache's plan: batch x steps ids of this client's samples.
            assert len(ids) == BATCH * STEPS
            assert ids.min() >= 0 and ids.max() < len(trainer.encoded)
    rows = server.rows()
    assert [int(r["round"]) for r in rows] == [1, 2, 3]
    # From round 2 on the importance cache holds samples kept from the previous round.
    assert all(0.0 <= float(r["cache_hit_ratio"]) <= 1.0 for r in rows)
    assert float(rows[1]["cache_hit_ratio"]) > 0 or float(rows[2]["cache_hit_ratio"]) > 0, rows
    accuracies = [float(r["client_eval_accuracy"]) for r in rows]
    assert accuracies[2] > accuracies[0] + 0.1, accuracies
