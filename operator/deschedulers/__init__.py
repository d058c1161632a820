"""The Descheduler resource: a policy and a schedule become a ConfigMap, RBAC and a Job/CronJob."""
