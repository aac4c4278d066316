"""A sweep keeps what the user specified (dataset_size, batch_size) on its rows, and its Parquet file carries
the schema's column descriptions in the fields' metadata (issue 35, item 6)."""

from __future__ import annotations

import pyarrow.parquet as pq
import pytest

from epscert.config import CertifyConfig
from epscert.schema import DESCRIPTIONS, RESULTS_SCHEMA
from pipelines import cli

SPEC = """\
sampler: [poisson]
sigma: [1.0]
dataset_size: [60000]
batch_size: [256, 600]
method: [auto]
epsilons: [1, 2]
baselines: false
"""


def test_sweep_rows_keep_dataset_and_batch_size_and_the_file_describes_its_columns(tmp_path, capsys):
    spec = tmp_path / "spec.yaml"
    spec.write_text(SPEC)
    out = tmp_path / "out"
    assert cli.main(["sweep", str(spec), "--output", str(out), "--no-progress"]) == 0, capsys.readouterr().err
    path = out / "results.parquet"
    rows = pq.read_table(path).to_pylist()
    assert {(r["dataset_size"], r["batch_size"], r["steps"]) for r in rows} == \
        {(60000, 256, 60000 // 256), (60000, 600, 60000 // 600)}
    assert all(r["max_batch_size"] is None and r["truncation_penalty"] is None for r in rows)  # not truncated
    schema = pq.read_schema(path)
    for name in RESULTS_SCHEMA.names:
        meta = schema.field(name).metadata or {}
        assert meta.get(b"description", b"").decode() == DESCRIPTIONS[name] and DESCRIPTIONS[name], name


def test_labels_change_no_number_and_must_agree_with_steps():
    plain = CertifyConfig(sampler="poisson", sigma=1.0, steps=234, epsilons=(1.0,))
    labelled = CertifyConfig(sampler="poisson", sigma=1.0, steps=234, epsilons=(1.0,), dataset_size=60000,
                             batch_size=256)
    assert not labelled.truncated
    assert plain.sampling_key(plain.resolved[0]) == labelled.sampling_key(labelled.resolved[0])
    assert plain.config_id != labelled.config_id  # one part per point the user asked for
    with pytest.raises(ValueError, match="steps must be dataset_size // batch_size = 234, got steps=235"):
        CertifyConfig(sampler="poisson", sigma=1.0, steps=235, epsilons=(1.0,), dataset_size=60000, batch_size=256)
    with pytest.raises(ValueError, match="batch_size needs dataset_size"):
        CertifyConfig(sampler="poisson", sigma=1.0, steps=234, epsilons=(1.0,), batch_size=256)
    with pytest.raises(ValueError, match="dataset_size and max_batch_size go together"):
        CertifyConfig(sampler="poisson", sigma=1.0, steps=234, epsilons=(1.0,), dataset_size=60000)


def test_every_column_is_described():
    assert set(DESCRIPTIONS) == set(RESULTS_SCHEMA.names)
    assert all(f.metadata[b"description"] for f in RESULTS_SCHEMA)
