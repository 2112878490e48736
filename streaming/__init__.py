"""Spark Structured Streaming side of the service: Kafka I/O, Spark session, match jobs."""
