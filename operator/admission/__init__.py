"""Placement admission: PodNodeSelector (with OpenShift's NodeEnv), PodTolerationRestriction and
PodNodeConstraints as one admission webhook served by the operator (docs/admission.md).

Design, from the pure core out:

- ``selectors``, ``podnodeselector``, ``podtolerationrestriction``, ``podnodeconstraints``: each
  plugin's rules and upstream's sentences, pure functions over plain API dicts;
- ``config``: the administrator's configuration in OpenShift's master-config shape, validated
  with every problem named; ``options``: the operator's ``--admission-*`` flags;
- ``review`` (AdmissionReview in and out, upstream's "is forbidden" wording) and ``decisions``
  (the mutating and the validating pass over one request, from facts gathered beforehand);
- at the edges: ``webhook`` gathers the facts (namespace, node, ``access``'s cached
  SubjectAccessReview) and answers, ``server`` serves HTTPS, ``certs`` decides the Secret's
  certificate and CA (pure) and ``registration`` writes the webhook configurations or their
  caBundle; ``handlers`` starts, maintains and stops all of it with the operator.
"""
