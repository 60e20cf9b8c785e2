"""What a summary shows: the Summary class (table, JSON, timeline, Prometheus, each made by the core)
and the self-contained HTML report."""
