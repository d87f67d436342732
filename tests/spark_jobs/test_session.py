"""Spark's reason for a session that did not start, in one line (spark_jobs/session.py)."""

from __future__ import annotations

from offsetwatch.spark_jobs.session import start_failure


class _JavaError(Exception):
    def __init__(self, java: str) -> None:
        super().__init__("An error occurred while calling None.JavaSparkContext.\n: ...")
        self.java_exception = java


def test_the_java_exception_behind_a_py4j_error() -> None:
    error = _JavaError("org.apache.spark.SparkException: Asked to run locally with 0 threads")
    assert start_failure(error, []) == "SparkException: Asked to run locally with 0 threads"


def test_a_jvm_that_exited_says_why_only_in_its_lines() -> None:
    lines = [
        "Error: Exception in thread main",
        'Exception in thread "main" org.apache.spark.SparkException: Master must either be '
        "yarn or start with spark, k8s, or local",
        "\tat org.apache.spark.deploy.SparkSubmit.error(SparkSubmit.scala:1097)",
    ]
    error = RuntimeError("[JAVA_GATEWAY_EXITED] Java gateway process exited")
    assert start_failure(error, lines) == (
        "SparkException: Master must either be yarn or start with spark, k8s, or local"
    )


def test_a_stopped_context_is_explained_by_the_logged_error() -> None:
    lines = [
        "26/12/07 07:34:10 WARN StandaloneAppClient$ClientEndpoint: Failed to connect to master",
        "26/12/07 07:34:30 ERROR StandaloneSchedulerBackend: Application has been killed. "
        "Reason: All masters are unresponsive! Giving up.",
    ]
    error = _JavaError(
        "java.lang.IllegalStateException: Cannot call methods on a stopped SparkContext."
    )
    assert start_failure(error, lines) == (
        "Application has been killed. Reason: All masters are unresponsive! Giving up."
    )


def test_nothing_java_leaves_the_python_error() -> None:
    assert start_failure(OSError("java: not found\nmore"), []) == "java: not found"
