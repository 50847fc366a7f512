"""HTTP handlers: the glue between an ingress codec, the routing engine and the metrics."""
