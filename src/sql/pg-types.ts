/**
 * Column type names and value parsing for query_db results.
 *
 * Values are kept close to PostgreSQL's own text output (dates, timestamps, numerics, int8, bytea
 * stay strings) so nothing is silently converted (no time-zone shifts, no float rounding of
 * numerics); only types with an exact JSON equivalent are converted: booleans, int2/int4/oid,
 * finite floats, and json/jsonb (parsed, so masking can walk keys and values).
 */

/** Built-in type OIDs (pg_type.oid, stable across PostgreSQL versions) to type names. */
const TYPE_NAMES: Record<number, string> = {
  16: 'bool', 17: 'bytea', 18: 'char', 19: 'name', 20: 'int8', 21: 'int2', 23: 'int4', 24: 'regproc',
  25: 'text', 26: 'oid', 114: 'json', 142: 'xml', 194: 'pg_node_tree', 650: 'cidr', 700: 'float4',
  701: 'float8', 705: 'unknown', 774: 'macaddr8', 790: 'money', 829: 'macaddr', 869: 'inet',
  1042: 'bpchar', 1043: 'varchar', 1082: 'date', 1083: 'time', 1114: 'timestamp', 1184: 'timestamptz',
  1186: 'interval', 1266: 'timetz', 1560: 'bit', 1562: 'varbit', 1700: 'numeric', 1790: 'refcursor',
  2205: 'regclass', 2206: 'regtype', 2249: 'record', 2278: 'void', 2950: 'uuid', 3220: 'pg_lsn',
  3614: 'tsvector', 3615: 'tsquery', 3802: 'jsonb', 3904: 'int4range', 3906: 'numrange',
  3908: 'tsrange', 3910: 'tstzrange', 3912: 'daterange', 3926: 'int8range', 4072: 'jsonpath',
  // arrays
  143: '_xml', 199: '_json', 651: '_cidr', 1000: '_bool', 1001: '_bytea', 1002: '_char', 1003: '_name',
  1005: '_int2', 1007: '_int4', 1009: '_text', 1014: '_bpchar', 1015: '_varchar', 1016: '_int8',
  1021: '_float4', 1022: '_float8', 1028: '_oid', 1041: '_inet', 1115: '_timestamp', 1182: '_date',
  1183: '_time', 1185: '_timestamptz', 1187: '_interval', 1231: '_numeric', 2951: '_uuid', 3807: '_jsonb',
};

export function typeName(oid: number): string {
  return TYPE_NAMES[oid] ?? `oid:${oid}`;
}

export type ValueParser = (text: string) => unknown;

const identity: ValueParser = (t) => t;
const parseBool: ValueParser = (t) => t === 't' || t === 'true';
const parseInt32: ValueParser = (t) => Number.parseInt(t, 10);
const parseFloatSafe: ValueParser = (t) => {
  const n = Number(t);
  return Number.isFinite(n) ? n : t; // NaN / Infinity have no JSON form: keep PostgreSQL's text
};
const parseJson: ValueParser = (t) => {
  try {
    return JSON.parse(t) as unknown;
  } catch {
    return t;
  }
};

/** The parser for a column's text-format values. */
export function parserFor(oid: number): ValueParser {
  switch (oid) {
    case 16: return parseBool;
    case 21: case 23: case 26: return parseInt32;
    case 700: case 701: return parseFloatSafe;
    case 114: case 3802: return parseJson;
    default: return identity;
  }
}
