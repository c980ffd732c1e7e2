"""The broker process: network layer, request dispatch, configuration and lifecycle."""
