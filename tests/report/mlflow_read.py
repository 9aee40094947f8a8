"""Reads back what gputrain logged to an MLflow server, with MLflow's own client.

usage: mlflow_read.py TRACKING_URI EXPERIMENT
Prints one JSON object: {"runs": [{name, status, params, tags, metrics: {key: [[step, value], ...]}, artifacts}]}.
"""
import json
import sys

from mlflow.tracking import MlflowClient


def main() -> None:
    uri, experiment = sys.argv[1], sys.argv[2]
    client = MlflowClient(tracking_uri=uri)
    found = client.get_experiment_by_name(experiment)
    runs = []
    if found is not None:
        for run in client.search_runs([found.experiment_id]):
            metrics = {}
            for key in run.data.metrics:
                history = client.get_metric_history(run.info.run_id, key)
                metrics[key] = sorted([m.step, m.value] for m in history)
            runs.append({
                "name": run.info.run_name,
                "status": run.info.status,
                "params": run.data.params,
                "tags": {k: v for k, v in run.data.tags.items() if not k.startswith("mlflow.")},
                "metrics": metrics,
                "artifacts": sorted(a.path for a in client.list_artifacts(run.info.run_id)),
            })
    print(json.dumps({"runs": runs}))


if __name__ == "__main__":
    main()
