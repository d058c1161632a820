"""Placement admission: PodNodeSelector (with OpenShift's NodeEnv), PodTolerationRestriction and
PodNodeConstraints as one admission webhook, served by ``berthmaster admission``, a stateless
process of its own, never inside the operator's loop (docs/admission.md).

Design, from the pure core out:

- ``selectors``, ``podnodeselector``, ``podtolerationrestriction``, ``podnodeconstraints``: each
  plugin's rules and upstream's sentences, pure functions over plain API dicts;
- ``config``: the administrator's configuration in OpenShift's master-config shape, validated
  with every problem named; ``options``: the command's flags and its limits;
- ``review`` (AdmissionReview in and out, upstream's "is forbidden" wording) and ``decisions``
  (the mutating and the validating pass over one request, from facts gathered beforehand);
- at the edges: ``webhook`` gathers the facts (namespace, node, ``access``'s cached
  SubjectAccessReview) and answers, or fails open or closed as the failurePolicy says when it
  cannot; ``server`` serves HTTPS within the limits; ``certs`` decides a self-managed Secret's
  certificate and CA (pure) and ``registration`` writes the webhook configurations;
  ``service`` starts, maintains and stops all of it; ``command`` is ``berthmaster admission``;
  ``metrics`` its counters.
"""
