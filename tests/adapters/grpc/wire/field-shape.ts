// Renders a message's fields as [number, name, type] rows, in the words of the reference tables, so
// a test can compare the generated descriptors against a table written from the reference.
import { ScalarType } from "@bufbuild/protobuf";
import type { DescEnum, DescField, DescFile, DescMessage } from "@bufbuild/protobuf";
import { Edition, FieldDescriptorProto_Label } from "@bufbuild/protobuf/wkt";

export type FieldRow = readonly [number: number, name: string, type: string];

/** Whether the file declares `syntax = "proto2"`. */
export function isProto2(file: DescFile): boolean {
  return file.edition === Edition.EDITION_PROTO2;
}

/**
 * The fields of `message` ordered by number. Types read like the source: `optional string` for a
 * proto2 optional or proto3 `optional` scalar, `repeated X`, `map<K, V>`; message and enum names
 * are relative to the message's own package and fully qualified otherwise.
 */
export function fieldRows(message: DescMessage): FieldRow[] {
  return [...message.fields]
    .sort((a, b) => a.number - b.number)
    .map((field) => [field.number, field.name, typeOf(field, message.file)] as const);
}

function typeOf(field: DescField, file: DescFile): string {
  const pkg = file.proto.package;
  switch (field.fieldKind) {
    case "scalar":
    case "enum":
    case "message":
      return optionalPrefix(field, file) + valueName(field, pkg);
    case "list":
      return `repeated ${valueName(field, pkg)}`;
    case "map":
      return `map<${scalarName(field.mapKey)}, ${valueName(field, pkg)}>`;
  }
}

/** The element type: of the field itself, of a list's items or of a map's values. */
function valueName(field: DescField, pkg: string): string {
  if (field.message) return nameIn(field.message, pkg);
  if (field.enum) return nameIn(field.enum, pkg);
  return scalarName(field.scalar);
}

function optionalPrefix(field: DescField, file: DescFile): string {
  const explicit = isProto2(file)
    ? field.proto.label === FieldDescriptorProto_Label.OPTIONAL
    : field.proto.proto3Optional;
  return explicit ? "optional " : "";
}

function scalarName(scalar: ScalarType): string {
  return ScalarType[scalar].toLowerCase();
}

function nameIn(desc: DescMessage | DescEnum, pkg: string): string {
  return desc.file.proto.package === pkg ? desc.typeName.slice(pkg.length + 1) : desc.typeName;
}
