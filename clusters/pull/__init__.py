"""Pull clients for live schedulers: the Kubernetes API and slurmrestd.

They fetch and return the raw JSON documents (no Django, no storage); the parsers in
``clusters.parsers`` read them exactly as they read pushed snapshots.
"""
