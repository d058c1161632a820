"""PodGroup status: scheduler-plugins' PodGroup controller, as an operator capability."""
