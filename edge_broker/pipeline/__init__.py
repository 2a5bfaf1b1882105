"""The cloud pipeline on Spark (DESIGN.md "The PySpark pipeline"; issue 10).

``python -m edge_broker.pipeline compile | collect | audit | whatif`` (console script
``edge-broker-pipeline``); needs the optional ``[pipeline]`` extra (pyspark, pyarrow, pandas).
The broker never imports this package.
"""
