"""Generate operator/machines/providers/aws/ec2_instance_types.csv from cluster-autoscaler's table.

Usage: python hack/gen-ec2-instance-types.py PATH/TO/ec2_instance_types.go COMMIT > \
           operator/machines/providers/aws/ec2_instance_types.csv

The source is kubernetes/autoscaler cluster-autoscaler/cloudprovider/aws/ec2_instance_types.go
(itself generated from the EC2 pricing API). Only the families in FAMILIES are kept, so the data
file stays small; the columns are the Go struct's fields.
"""

import re
import sys

FAMILIES = ("t3", "t3a", "m4", "m5", "m5a", "m6i", "m6a", "m6g", "m7i", "m7g", "c5", "c6i",
            "c6g", "c7i", "r5", "r6i", "r6g", "r7i", "g4dn", "g5", "p3", "p4d")
ENTRY = re.compile(r'InstanceType:\s*"([^"]+)",\s*VCPU:\s*(\d+),\s*MemoryMb:\s*(\d+),\s*'
                   r'GPU:\s*(\d+),\s*Architecture:\s*"([^"]+)"')


def main() -> None:
    path, commit = sys.argv[1], sys.argv[2]
    text = open(path).read()
    updated = re.search(r'StaticListLastUpdateTime = "([^"]+)"', text)
    print("# EC2 instance types: vCPU, memory (MiB), GPUs, architecture.")
    print("# Source: kubernetes/autoscaler cluster-autoscaler/cloudprovider/aws/"
          f"ec2_instance_types.go at {commit}")
    print(f"# (StaticListLastUpdateTime {updated.group(1) if updated else '?'}); families: "
          + " ".join(FAMILIES))
    print("# Regenerate with hack/gen-ec2-instance-types.py.")
    print("instance_type,vcpu,memory_mb,gpu,architecture")
    for name, vcpu, memory, gpu, arch in sorted(ENTRY.findall(text)):
        if name.split(".")[0] in FAMILIES:
            print(f"{name},{vcpu},{memory},{gpu},{arch}")


if __name__ == "__main__":
    main()
