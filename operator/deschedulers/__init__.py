"""The operator's ``deschedulers`` capability: each ``Descheduler`` resource's policy and
schedule become a ConfigMap, RBAC and a Job/CronJob. The Job runs the descheduler program,
:mod:`berthmaster.scheduler.descheduler` (singular), which does the evicting; this package only
builds and watches what runs it."""
