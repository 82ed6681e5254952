"""What the module and its examples use of hashicorp/aws, and the provider schemas that use is checked against.

Terraform installs only the mirrored provider here (5.100), whose schema `terraform providers schema -json` gives. The
module also admits 6.x, which is checked against a published schema instead: CDK Terrain's prebuilt bindings (PyPI
`cdktn-provider-aws`, pinned with its hash in development/provider-schema-requirements.txt) are generated from one
provider release's schema, and each resource's index.js carries the TypeScript it was compiled from (in its inline
source map). That TypeScript names every argument and block in Terraform's spelling: `synthesizeHclAttributes` (and
each nested block's `...ToHclTerraform` function) gives its type and whether it is a block, and a comment before each
member says whether it is required, optional or computed. `make provider-schema` reads from the package the types the
module and its examples use, and SENTINELS, into SCHEMA_FILE (committed: the test needs no download), in the shape of
Terraform's own `providers schema -json`, so that one comparison reads both versions.

The bindings carry no deprecations: those of 6.x that touch the module are DEPRECATED_IN_6, from the provider's
upgrade guide and source.
"""

from __future__ import annotations

import base64
import json
import re
import subprocess
import tarfile
import tempfile
import zipfile
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from leaderboard_dev.settings import REPOSITORY, TERRAFORM_MODULE

REQUIREMENTS = REPOSITORY / "development" / "provider-schema-requirements.txt"
"""The package (name==version --hash=sha256:...) that SCHEMA_FILE is generated from."""
PACKAGE_DIR = REPOSITORY / "build" / "provider-schema"
"""Where `make provider-schema-package` downloads it (build/ is ignored by git)."""
SCHEMA_FILE = REPOSITORY / "tests" / "unit" / "terraform" / "hashicorp-aws-6.json"
PROVIDER = "registry.terraform.io/hashicorp/aws"

CONFIGURATIONS = (
    TERRAFORM_MODULE,
    *sorted(path for path in (TERRAFORM_MODULE / "examples").glob("*") if path.is_dir()),
)
"""What a platform stack runs on 6.x: the module and its examples (the development stack stays on the tested 5.x)."""

KINDS = ("provider", "resource", "data")
SENTINELS = (
    ("resource", "aws_simpledb_domain"),  # removed in 6.0.0 (SimpleDB)
    ("resource", "aws_eip"),  # its `vpc` argument was removed in 6.0.0 (use `domain`)
    ("resource", "aws_batch_compute_environment"),  # `compute_environment_name` was renamed `name` in 6.0.0
)
"""Types the module does not use, kept in SCHEMA_FILE so that the test can prove a removal or rename is reported."""

DEPRECATED_IN_6: dict[tuple[str, str, tuple[str, ...]], str] = {
    ("data", "aws_region", ("name",)): "6.0.0 deprecates it for `region` (upgrade guide, Data Source aws_region)",
    ("resource", "aws_dynamodb_table", ("global_secondary_index", "hash_key")): (
        "6.x deprecates it for the block's `key_schema` (6.29.0), which 5.x lacks: 'hash_key is deprecated. Use "
        "key_schema instead.' (the provider's source)"
    ),
    ("resource", "aws_dynamodb_table", ("global_secondary_index", "range_key")): (
        "6.x deprecates it for the block's `key_schema` (6.29.0), which 5.x lacks: 'range_key is deprecated. Use "
        "key_schema instead.' (the provider's source)"
    ),
}
"""Deprecations of 6.x that touch what the module uses or used: the bindings carry none."""

META_ARGUMENTS = {
    "resource": {"count", "for_each", "depends_on", "provider", "lifecycle", "provisioner", "connection"},
    "data": {"count", "for_each", "depends_on", "provider", "lifecycle"},
    "provider": {"alias", "version"},
}
"""Terraform's own arguments of each kind of block: no provider schema holds them."""
REFERENCE = re.compile(r"(?<![\w.])(data\.)?(aws_[a-z0-9_]+)\.([A-Za-z_][\w-]*)(?:\[[^\]]*\])?\.([a-z_][a-z0-9_]*)")
"""`aws_x.name.attribute`, `aws_x.name[0].attribute`, `aws_x.name[*].attribute`, and the same after `data.`."""


# ---------------------------------------------------------------- what the configurations use


@dataclass(frozen=True)
class Use:
    """One argument or block a configuration sets, or one attribute it references, of one provider type."""

    kind: str  # provider | resource | data
    type: str  # aws_dynamodb_table (the provider: aws)
    path: tuple[str, ...]  # ("global_secondary_index", "hash_key")
    what: str  # argument | block | reference
    value: Any = None  # an argument's value as python-hcl2 gives it (for a literal's type)
    where: str = ""  # file and block, for messages

    def __str__(self) -> str:
        name = ".".join(self.path)
        label = {"provider": "provider", "resource": "resource", "data": "data source"}[self.kind]
        return f"{label} {self.type}: {self.what} {name} ({self.where})"


def _unquoted(text: str) -> str:
    return text.strip('"')


def _is_block_list(value: Any) -> bool:
    return (
        isinstance(value, list)
        and bool(value)
        and all(isinstance(item, dict) and "__is_block__" in item for item in value)
    )


def _body_uses(kind: str, type_: str, body: dict[str, Any], path: tuple[str, ...], where: str) -> Iterator[Use]:
    for key, value in body.items():
        if key.startswith("__") or (not path and key in META_ARGUMENTS[kind]):  # __is_block__, __comments__
            continue
        if key == "dynamic":
            for dynamic in value:
                for label, spec in dynamic.items():
                    name = _unquoted(label)
                    yield Use(kind, type_, (*path, name), "block", where=where)
                    for content in spec.get("content", []):
                        yield from _body_uses(kind, type_, content, (*path, name), where)
        elif _is_block_list(value):
            yield Use(kind, type_, (*path, key), "block", where=where)
            for each in value:
                yield from _body_uses(kind, type_, each, (*path, key), where)
        else:
            yield Use(kind, type_, (*path, key), "argument", value, where)


def _strings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for key, item in value.items():
            if not key.startswith("__"):  # python-hcl2's __comments__ are no references
                yield from _strings(key)
                yield from _strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item)


def document_uses(document: dict[str, Any], where: str) -> list[Use]:
    """What one parsed .tf file (python-hcl2's dict) uses of hashicorp/aws."""
    found: list[Use] = []
    for provider in document.get("provider", []):
        for name, body in provider.items():
            if _unquoted(name) == "aws":
                found += _body_uses("provider", "aws", body, (), f"{where}: provider aws")
    for kind in ("resource", "data"):
        for block in document.get(kind, []):
            for type_label, instances in block.items():
                type_ = _unquoted(type_label)
                if not type_.startswith("aws_"):
                    continue
                for name, body in instances.items():
                    found += _body_uses(kind, type_, body, (), f"{where}: {kind} {type_}.{_unquoted(name)}")
    for text in _strings(document):
        for match in REFERENCE.finditer(text):
            data, type_, name, attribute = match.groups()
            kind = "data" if data else "resource"
            found.append(Use(kind, type_, (attribute,), "reference", where=f"{where}: {match.group(0)}"))
    return found


def configuration_uses(directories: Iterable[Path] = CONFIGURATIONS) -> list[Use]:
    """Every argument, block and attribute reference of hashicorp/aws in the directories' .tf files."""
    import hcl2

    found: list[Use] = []
    for directory in directories:
        for path in sorted(directory.glob("*.tf")):
            with path.open() as handle:
                found += document_uses(hcl2.load(handle), str(path.relative_to(REPOSITORY)))
    return found


def text_uses(text: str, where: str = "synthetic.tf") -> list[Use]:
    """What a configuration given as text uses: for tests of the check itself."""
    import hcl2

    return document_uses(hcl2.loads(text), where)


def used_types(uses: Iterable[Use]) -> set[tuple[str, str]]:
    return {(use.kind, use.type) for use in uses}


# ---------------------------------------------------------------- schemas: Terraform's JSON, reduced

Schemas = dict[str, dict[str, Any]]
"""{"provider": {"aws": block}, "resource": {type: block | None}, "data": {type: block | None}}; None: no such type."""


def simple_type(cty: Any) -> Any:
    """A cty type as `providers schema -json` writes it, with object and tuple types reduced to their kind."""
    if isinstance(cty, str):
        return cty
    if cty[0] in ("object", "tuple"):
        return cty[0]
    return [cty[0], simple_type(cty[1])]


def normalised_block(block: dict[str, Any]) -> dict[str, Any]:
    """The parts of a Terraform schema block the check reads: types, required/optional/computed, deprecated."""
    attributes = {}
    for name, attribute in sorted(block.get("attributes", {}).items()):
        if "nested_type" in attribute:
            nested = attribute["nested_type"]
            reduced: dict[str, Any] = {"type": [nested.get("nesting_mode", "single"), "object"]}
        else:
            reduced = {"type": simple_type(attribute["type"])}
        reduced |= {flag: True for flag in ("required", "optional", "computed", "deprecated") if attribute.get(flag)}
        attributes[name] = reduced
    block_types = {}
    for name, nested in sorted(block.get("block_types", {}).items()):
        reduced = {"nesting_mode": nested["nesting_mode"]}
        reduced |= {bound: nested[bound] for bound in ("min_items", "max_items") if nested.get(bound)}
        reduced["block"] = normalised_block(nested["block"])
        block_types[name] = reduced
    result: dict[str, Any] = {"attributes": attributes, "block_types": block_types}
    if block.get("deprecated"):
        result["deprecated"] = True
    return result


TESTED_MAJOR = ">= 5.100.0, < 6.0.0"
"""The 5.x the tests plan and apply with: what the mirror holds (and, with no mirror, what the registry has)."""


def installed_schemas(types: Iterable[tuple[str, str]], constraint: str = TESTED_MAJOR) -> tuple[str, Schemas]:
    """(version, schemas) of the hashicorp/aws Terraform installs here (the mirror's), for these types.

    A configuration of its own in a temporary folder: `init` links the provider from the mirror, and no other test's
    working folder is touched."""
    from leaderboard_dev.terraform_stack import terraform_environment

    environment = terraform_environment(None)
    with tempfile.TemporaryDirectory(prefix="provider-schema-") as folder:
        Path(folder, "versions.tf").write_text(
            "terraform {\n  required_providers {\n    aws = {\n"
            f'      source  = "hashicorp/aws"\n      version = "{constraint}"\n'
            "    }\n  }\n}\n"
        )

        def terraform(*arguments: str) -> str:
            result = subprocess.run(
                ["terraform", *arguments], cwd=folder, env=environment, capture_output=True, text=True, check=False
            )
            if result.returncode != 0:
                raise RuntimeError(f"terraform {' '.join(arguments)}: {result.stderr or result.stdout}")
            return result.stdout

        terraform("init", "-backend=false", "-input=false", "-no-color")
        version = json.loads(terraform("version", "-json"))["provider_selections"][PROVIDER]
        schema = json.loads(terraform("providers", "schema", "-json"))["provider_schemas"][PROVIDER]
    sources = {"provider": {"aws": schema["provider"]}, "resource": schema["resource_schemas"]}
    sources["data"] = schema["data_source_schemas"]
    schemas: Schemas = {kind: {} for kind in KINDS}
    for kind, type_ in sorted(types):
        found = sources[kind].get(type_)
        schemas[kind][type_] = None if found is None else normalised_block(found["block"])
    return version, schemas


# ---------------------------------------------------------------- schemas: the published 6.x bindings


def pinned_package() -> tuple[str, str]:
    """(name, version) pinned in REQUIREMENTS."""
    for line in REQUIREMENTS.read_text().splitlines():
        match = re.match(r"^([A-Za-z0-9_.-]+)==([0-9][^\s;]*)", line)
        if match:
            return match.group(1), match.group(2)
    raise ValueError(f"{REQUIREMENTS} pins no package")


def package_path(directory: Path = PACKAGE_DIR) -> Path | None:
    """The pinned wheel, if `make provider-schema-package` has downloaded it."""
    name, version = pinned_package()
    wheels = sorted(directory.glob(f"{name.replace('-', '_')}-{version}-*.whl"))
    return wheels[0] if wheels else None


def _lower_first(name: str) -> str:
    return name[:1].lower() + name[1:]


def _upper_first(name: str) -> str:
    return name[:1].upper() + name[1:]


def _sections(source: str, keyword: str) -> dict[str, str]:
    """Each top-level `export <keyword> Name` of the TypeScript, by name, up to the next top-level export."""
    found = {}
    pattern = re.compile(rf"^export {keyword} (\w+)", re.MULTILINE)
    starts = [match.start() for match in re.finditer(r"^export ", source, re.MULTILINE)] + [len(source)]
    for match in pattern.finditer(source):
        end = next(start for start in starts if start > match.start())
        found[match.group(1)] = source[match.start() : end]
    return found


SYNTHESIZED = re.compile(
    r"^\s*(\w+): \{\n\s*value: ([^\n]*)\n\s*isBlock: (true|false),\n\s*type: \"(\w+)\",\n"
    r"\s*storageClassType: \"(\w+)\",\n\s*\}",
    re.MULTILINE,
)
MEMBER = re.compile(
    r"^  // (\w+) - computed: (true|false), optional: (true|false), required: (true|false)\n"
    r"(.*?)(?=^  // \w+ - computed:|\Z)",
    re.MULTILINE | re.DOTALL,
)
GETTER_TYPES = {
    "String": "string",
    "Number": "number",
    "Boolean": "bool",
    "List": ["list", "string"],
    "NumberList": ["list", "number"],
    "StringMap": ["map", "string"],
    "NumberMap": ["map", "number"],
    "BooleanMap": ["map", "bool"],
    "AnyMap": ["map", "dynamic"],
}
ELEMENT_TYPES = {"string": "string", "number": "number", "boolean": "bool"}


def _argument_type(kind: str, storage: str) -> Any:
    """An argument's type from synthesizeHclAttributes' `type` and `storageClassType`."""
    if kind == "simple":
        return ELEMENT_TYPES.get(storage, "dynamic")
    for element, cty in ELEMENT_TYPES.items():
        if storage in (f"{element}List", f"{element}Map"):
            return [kind, cty]
    if storage.endswith(("List", "Map", "OutputReference")):
        return [kind, "object"]  # a nested attribute of objects
    return [kind, "dynamic"]


def _computed_type(body: str) -> Any:
    """A computed-only attribute's type, from its getter."""
    getter = re.search(r"this\.get(\w*?)Attribute\('", body)
    if getter:
        return GETTER_TYPES.get(getter.group(1), "dynamic")
    nested = re.search(r"new (?:cdktn\.)?(\w+?)(List|Map|OutputReference)\(this, \"\w+\"(?:, (true|false))?\)", body)
    if nested:
        if nested.group(2) == "Map":
            return ["map", "object"]
        return ["set" if nested.group(3) == "true" else "list", "object"]
    return "dynamic"


class _Bindings:
    """The TypeScript of one resource's bindings, read into Terraform's schema shape."""

    def __init__(self, source: str) -> None:
        self.classes = _sections(source, "class")
        self.interfaces = _sections(source, "interface")
        self.functions = _sections(source, "function")

    def root(self) -> tuple[str, str, dict[str, Any]]:
        """(kind, Terraform type, block) of the resource, data source or provider the file defines."""
        for name, body in self.classes.items():
            match = re.search(r"^export class \w+ extends cdktn\.Terraform(Resource|DataSource|Provider) ", body)
            if match:
                kind = {"Resource": "resource", "DataSource": "data", "Provider": "provider"}[match.group(1)]
                type_ = re.search(r'tfResourceType = "([\w-]+)"', body)
                assert type_ is not None, name
                synthesized = re.search(r"synthesizeHclAttributes\(\).*?\n  \}\n", body, re.DOTALL)
                assert synthesized is not None, name
                return (
                    kind,
                    type_.group(1),
                    self.block(synthesized.group(0), body, self.interfaces.get(f"{name}Config")),
                )
        raise ValueError("no resource, data source or provider class")

    def nested(self, struct: str) -> dict[str, Any]:
        function = self.functions[f"{_lower_first(struct)}ToHclTerraform"]
        return self.block(function, self.classes.get(f"{struct}OutputReference"), self.interfaces.get(struct))

    def block(self, synthesized: str, members: str | None, interface: str | None) -> dict[str, Any]:
        flags: dict[str, dict[str, bool]] = {}
        computed_only: dict[str, str] = {}
        for match in MEMBER.finditer(members or ""):
            name, computed, optional, required, body = match.groups()
            flags[name] = {
                "computed": computed == "true",
                "optional": optional == "true",
                "required": required == "true",
            }
            if flags[name] == {"computed": True, "optional": False, "required": False}:
                computed_only[name] = body
        if not flags and interface:  # structs without an output reference (the provider's): the interface's `?`
            for match in re.finditer(r"#(\w+) \w+#\w+\}\n(?:\s*\*[^\n]*\n)*?\s*\*/\n\s*readonly \w+(\?)?:", interface):
                flags[match.group(1)] = {
                    "computed": False,
                    "optional": bool(match.group(2)),
                    "required": not match.group(2),
                }
        attributes: dict[str, Any] = {}
        block_types: dict[str, Any] = {}
        for name, value, is_block, kind, storage in SYNTHESIZED.findall(synthesized):
            flag = {key: True for key, on in flags.get(name, {"optional": True}).items() if on}
            if is_block == "true":
                struct = re.search(r"(?<![.\w])([a-z]\w*)ToHclTerraform", value)
                assert struct is not None, (name, value)
                nested: dict[str, Any] = {"nesting_mode": {"set": "set", "struct": "single"}.get(kind, "list")}
                if flag.get("required"):
                    nested["min_items"] = 1
                if kind == "list" and "listMapperHcl" not in value:
                    nested["max_items"] = 1
                nested["block"] = self.nested(_upper_first(struct.group(1)))
                block_types[name] = nested
            else:
                attributes[name] = {"type": _argument_type(kind, storage), **flag}
        for name, body in computed_only.items():
            attributes.setdefault(name, {"type": _computed_type(body), "computed": True})
        return {"attributes": dict(sorted(attributes.items())), "block_types": dict(sorted(block_types.items()))}


def _typescript(javascript: str) -> str:
    source_map = re.search(r"sourceMappingURL=data:application/json;base64,(\S+)", javascript)
    assert source_map is not None, "index.js without an inline source map"
    return json.loads(base64.b64decode(source_map.group(1)))["sourcesContent"][0]


def _folder(kind: str, type_: str) -> str:
    """The package's lib/ folder of a type: aws_dynamodb_table -> dynamodb-table, data aws_region -> data-aws-region."""
    if kind == "provider":
        return "provider"
    stem = type_.removeprefix("aws_").replace("_", "-")
    return f"data-aws-{stem}" if kind == "data" else stem


def package_schemas(wheel: Path, types: Iterable[tuple[str, str]]) -> dict[str, Any]:
    """SCHEMA_FILE's content from the pinned wheel: its provider version and these types' schemas (None: absent)."""
    wanted = {f"package/lib/{_folder(kind, type_)}/index.js": (kind, type_) for kind, type_ in types}
    schemas: Schemas = {kind: {} for kind in KINDS}
    metadata: dict[str, Any] = {}
    with zipfile.ZipFile(wheel) as archive:
        (tarball,) = [name for name in archive.namelist() if name.endswith(".jsii.tgz")]
        with archive.open(tarball) as handle, tarfile.open(fileobj=handle, mode="r|gz") as tar:
            for member in tar:
                if member.name == "package/package.json":
                    metadata = json.load(tar.extractfile(member))  # type: ignore[arg-type]
                elif member.name in wanted:
                    javascript = tar.extractfile(member).read().decode()  # type: ignore[union-attr]
                    kind, type_, block = _Bindings(_typescript(javascript)).root()
                    assert (kind, type_) == wanted[member.name], (member.name, kind, type_)
                    schemas[kind][type_] = block
    for kind, type_ in wanted.values():
        schemas[kind].setdefault(type_, None)
    generated_from = metadata["cdktf"]["provider"]
    assert generated_from["name"] == PROVIDER, generated_from
    name, version = pinned_package()
    return {
        "generated_by": "make provider-schema (python -m leaderboard_dev provider-schema)",
        "package": f"{name}=={version}",
        "package_json_version": metadata["version"],
        "provider": generated_from["name"],
        "provider_version": generated_from["version"],
        "schemas": {kind: dict(sorted(schemas[kind].items())) for kind in KINDS},
    }


def committed() -> dict[str, Any]:
    return json.loads(SCHEMA_FILE.read_text())


def rendered(content: dict[str, Any]) -> str:
    return json.dumps(content, indent=1, sort_keys=False) + "\n"


def wanted_types() -> set[tuple[str, str]]:
    return used_types(configuration_uses()) | set(SENTINELS)


def generate(wheel: Path) -> str:
    return rendered(package_schemas(wheel, wanted_types()))


# ---------------------------------------------------------------- the check


def deprecations(schemas: Schemas) -> Schemas:
    """The 6.x schemas with DEPRECATED_IN_6 marked on them (a copy)."""
    marked = json.loads(json.dumps(schemas))
    for (kind, type_, path), _why in DEPRECATED_IN_6.items():
        block = marked[kind].get(type_)
        if block is None:
            continue
        for step in path[:-1]:
            block = block["block_types"].get(step, {}).get("block", {"attributes": {}, "block_types": {}})
        if path[-1] in block["attributes"]:
            block["attributes"][path[-1]]["deprecated"] = True
    return marked


def _literal_type(value: Any) -> str | None:
    """The type of a literal argument value as python-hcl2 gives it; None for an expression."""
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        if value.startswith("${"):
            return None
        return "string" if value.startswith('"') else None
    if isinstance(value, list):
        return "collection"
    if isinstance(value, dict):
        return "object"
    return None


def _literal_fits(literal: str, cty: Any) -> bool:
    if literal == "collection":
        return isinstance(cty, list) and cty[0] in ("list", "set")
    if literal == "object":
        return cty in ("object", "dynamic") or (isinstance(cty, list) and cty[0] in ("map", "object"))
    if literal == "string":  # Terraform converts a string literal to a number or bool where one is expected
        return cty in ("string", "number", "bool", "dynamic")
    return cty in (literal, "string", "dynamic")


def _schema_at(block: dict[str, Any], path: tuple[str, ...]) -> tuple[dict[str, Any] | None, str | None]:
    """(the block holding path's last step, or None; the first missing block's name)."""
    for step in path[:-1]:
        nested = block["block_types"].get(step)
        if nested is None:
            return None, step
        block = nested["block"]
    return block, None


def problems(uses: Iterable[Use], schemas: Schemas, version: str) -> list[str]:
    """Why the configurations would not plan, or would warn, on hashicorp/aws `version` with these schemas."""
    found: list[str] = []
    uses = list(uses)
    for use in uses:
        root = schemas.get(use.kind, {}).get(use.type, "unknown")
        if root == "unknown":
            found.append(f"{use}: {use.type} is not in the schema file (run `make provider-schema`)")
            continue
        if root is None:
            found.append(f"{use}: hashicorp/aws {version} has no {use.kind} {use.type}")
            continue
        block, missing = _schema_at(root, use.path)
        name = use.path[-1]
        if block is None:
            found.append(f"{use}: hashicorp/aws {version} has no block {missing}")
            continue
        attribute, nested = block["attributes"].get(name), block["block_types"].get(name)
        if use.what == "reference":
            if attribute is None and nested is None:
                found.append(f"{use}: hashicorp/aws {version} has no attribute {name}")
            elif attribute is not None and attribute.get("deprecated"):
                found.append(f"{use}: {name} is deprecated in hashicorp/aws {version}")
        elif use.what == "block":
            if nested is None:
                detail = "an argument, not a block" if attribute is not None else "no such block"
                found.append(f"{use}: in hashicorp/aws {version}, {name} is {detail}")
        elif attribute is None:
            detail = "a block, not an argument" if nested is not None else "no such argument"
            found.append(f"{use}: in hashicorp/aws {version}, {name} is {detail}")
        elif not (attribute.get("optional") or attribute.get("required")):
            found.append(f"{use}: in hashicorp/aws {version}, {name} is read-only (computed)")
        else:
            if attribute.get("deprecated"):
                found.append(f"{use}: {name} is deprecated in hashicorp/aws {version}")
            literal = _literal_type(use.value)
            if literal is not None and not _literal_fits(literal, attribute["type"]):
                found.append(f"{use}: a {literal} where hashicorp/aws {version} takes {attribute['type']}")
    found += _missing_required(uses, schemas, version)
    return found


def _missing_required(uses: list[Use], schemas: Schemas, version: str) -> list[str]:
    """A required argument or block that a used type or block does not set (an argument that became required)."""
    set_paths: dict[tuple[str, str, str], set[tuple[str, ...]]] = {}
    block_paths: dict[tuple[str, str, str], set[tuple[str, ...]]] = {}
    for use in uses:
        if use.what != "reference":
            set_paths.setdefault((use.kind, use.type, use.where), set()).add(use.path)
            block_paths.setdefault((use.kind, use.type, use.where), {()})
            if use.what == "block":
                block_paths[(use.kind, use.type, use.where)].add(use.path)
    found = []
    for (kind, type_, where), paths in sorted(set_paths.items()):
        root = schemas.get(kind, {}).get(type_)
        if not root:
            continue
        for parent in sorted(block_paths[(kind, type_, where)]):
            block, _ = _schema_at(root, (*parent, ""))
            if block is None:
                continue
            required = [name for name, attribute in block["attributes"].items() if attribute.get("required")]
            required += [name for name, nested in block["block_types"].items() if nested.get("min_items")]
            for name in required:
                if (*parent, name) not in paths:
                    label = ".".join((*parent, name))
                    found.append(
                        f"{kind} {type_} ({where}): hashicorp/aws {version} requires {label}, which is not set"
                    )
    return found


def _compatible(old: Any, new: Any) -> bool:
    """Types a configuration written for one accepts in the other: equal, or a list and a set of one element type."""
    if old == new:
        return True
    return isinstance(old, list) and isinstance(new, list) and {old[0], new[0]} <= {"list", "set"} and old[1] == new[1]


def _shape(nested: dict[str, Any]) -> str:
    return "one" if nested["nesting_mode"] == "single" or nested.get("max_items") == 1 else "many"


def changes(uses: Iterable[Use], before: Schemas, after: Schemas, versions: tuple[str, str]) -> list[str]:
    """Where what the configurations use changed type or shape between two versions' schemas."""
    found = []
    for use in uses:
        old_root, new_root = before.get(use.kind, {}).get(use.type), after.get(use.kind, {}).get(use.type)
        if not old_root or not new_root:
            continue
        (old, _), (new, _) = _schema_at(old_root, use.path), _schema_at(new_root, use.path)
        if old is None or new is None:
            continue
        name = use.path[-1]
        old_attribute, new_attribute = old["attributes"].get(name), new["attributes"].get(name)
        old_block, new_block = old["block_types"].get(name), new["block_types"].get(name)
        if old_attribute and new_attribute and not _compatible(old_attribute["type"], new_attribute["type"]):
            found.append(f"{use}: {old_attribute['type']} in {versions[0]}, {new_attribute['type']} in {versions[1]}")
        if old_block and new_block and _shape(old_block) != _shape(new_block):
            found.append(
                f"{use}: a block of {_shape(old_block)} in {versions[0]}, of {_shape(new_block)} in {versions[1]}"
            )
    return found
