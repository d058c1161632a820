"""Placement admission: PodNodeSelector, PodTolerationRestriction and PodNodeConstraints as one
admission webhook served by the operator.

Design: one pure module per plugin decides (``podnodeselector``, ``podtolerationrestriction``,
``podnodeconstraints``), ``config`` reads the administrator's configuration in the OpenShift
master-config shape, ``review`` turns an AdmissionReview into the decisions' inputs and the
answer back into an AdmissionReview; I/O lives at the edges: ``certs`` (the serving
certificate and its CA in a Secret, rotated before expiry), ``registration`` (the webhook
configurations and their caBundle), ``access`` (SubjectAccessReviews, cached briefly),
``server`` (the HTTPS endpoints) and ``handlers`` (started and stopped with the operator).
docs/admission.md is the user's page.
"""
