"""The routing core of an Apache ActiveMQ Artemis broker over Delta Lake tables."""
