"""fedsched.Client's trainers per job and labels (docs/guides/JOBS.md "Devices and trainers").

Smoke tests of the constructor: the SDK's routing itself is tested in C++
(tests/client/sdk/job_trainers_test.cc). Creating a client does not connect, so no server runs.
"""

import pytest

import fedsched


class Nop(fedsched.Trainer):
    def train(self, weights, sample_ids):
        return dict(weights), [0.0] * len(sample_ids)


def config(tmp_path):
    return f'server_address: "127.0.0.1:1" identity: "py-jobs" state_dir: "{tmp_path}"'


def test_named_trainers_alone_or_beside_the_default(tmp_path):
    alone = fedsched.Client(config(tmp_path), None, num_samples=4,
                            trainers={"kbd": Nop(), "mlp": Nop()}, labels=["keyboard-en"])
    assert alone.stats()["tasks_without_trainer"] == 0
    beside = fedsched.Client(config(tmp_path), Nop(), num_samples=4, trainers={"kbd": Nop()})
    assert beside.stats()["tasks_completed"] == 0


def test_named_trainers_with_the_sample_cache(tmp_path):
    samples = [fedsched.encode_sample([0.5] * 4, 1) for _ in range(3)]
    client = fedsched.Client(config(tmp_path), None, samples=samples,
                             trainers={"kbd": Nop()}, labels=["a", "b"])
    assert client.stats()["tasks_failed"] == 0


def test_bad_trainers_and_labels_are_refused(tmp_path):
    with pytest.raises(TypeError, match=r'trainers\["kbd"\] must be an instance'):
        fedsched.Client(config(tmp_path), None, num_samples=4, trainers={"kbd": object()})
    with pytest.raises(ValueError, match="a name is empty"):
        fedsched.Client(config(tmp_path), None, num_samples=4, trainers={"": Nop()})
    with pytest.raises(ValueError, match="label is empty"):
        fedsched.Client(config(tmp_path), Nop(), num_samples=4, labels=["a", ""])
    with pytest.raises(TypeError, match="trainer must be an instance"):
        fedsched.Client(config(tmp_path), None, num_samples=4)
