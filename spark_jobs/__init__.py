"""spark_jobs package."""
