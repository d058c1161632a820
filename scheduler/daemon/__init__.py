"""The running scheduler (``berthmaster scheduler``): cache, queue, binder, events, election."""
