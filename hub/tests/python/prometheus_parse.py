"""Parses a Prometheus text exposition with the official client's parser
(prometheus_client). stdin: a JSON string, the exposition; stdout: JSON
{"families": {name: type}, "samples": [{"name", "labels", "value"}]}.
Run by the hub's API test `operations`; a malformed exposition fails here.
"""

import json
import sys

from prometheus_client.parser import text_string_to_metric_families

text = json.load(sys.stdin)
families, samples = {}, []
for family in text_string_to_metric_families(text):
    families[family.name] = family.type
    for s in family.samples:
        samples.append({"name": s.name, "labels": s.labels, "value": s.value})
json.dump({"families": families, "samples": samples}, sys.stdout)
