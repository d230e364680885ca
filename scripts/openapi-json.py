#!/usr/bin/env python3
"""Compiles docs/openapi.yaml into a C++ source that returns it as JSON
(GET /openapi.json; src/cmd/openapi.h). Usage: openapi-json.py IN.yaml OUT.cc"""
import json
import sys

import yaml


def main():
    source, out = sys.argv[1], sys.argv[2]
    with open(source, encoding="utf-8") as f:
        doc = yaml.safe_load(f)
    text = json.dumps(doc, ensure_ascii=False, separators=(",", ":"), sort_keys=False)
    # A raw string literal in pieces (compilers bound one literal's length).
    pieces = [text[i:i + 8000] for i in range(0, len(text), 8000)]
    with open(out, "w", encoding="utf-8") as f:
        f.write("// Generated from docs/openapi.yaml by scripts/openapi-json.py. Do not edit.\n")
        f.write('#include "cmd/openapi.h"\n\n#include <string>\n\nnamespace hotrow::cmd {\n\n')
        f.write("std::string_view OpenApiJson() {\n  static const std::string json = std::string()")
        for p in pieces:
            f.write('\n    + R"hotrow_openapi(' + p + ')hotrow_openapi"')
        f.write(";\n  return json;\n}\n\n}  // namespace hotrow::cmd\n")


if __name__ == "__main__":
    main()
