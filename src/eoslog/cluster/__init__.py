"""Topics and partitions: the layer between API handlers and the partition logs."""
