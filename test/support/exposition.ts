/** The Prometheus text exposition format (0.0.4), parsed for tests (not with prom-client). */

export interface Sample {
  name: string;
  labels: Record<string, string>;
  value: number;
}

export interface Exposition {
  samples: Sample[];
  /** `# TYPE name type` lines. */
  types: Map<string, string>;
  /** `# HELP name text` lines. */
  help: Map<string, string>;
}

/** Parses the Prometheus text exposition format (0.0.4): `name{l="v",…} value [timestamp]`. */
export function parseExposition(text: string): Exposition {
  const samples: Sample[] = [];
  const types = new Map<string, string>();
  const help = new Map<string, string>();
  for (const raw of text.split('\n')) {
    const line = raw.trim();
    if (line === '') continue;
    if (line.startsWith('#')) {
      const m = /^#\s+(TYPE|HELP)\s+([a-zA-Z_:][a-zA-Z0-9_:]*)\s*(.*)$/.exec(line);
      if (m?.[1] === 'TYPE') types.set(m[2]!, m[3]!);
      else if (m?.[1] === 'HELP') help.set(m[2]!, m[3]!);
      continue;
    }
    const nameMatch = /^[a-zA-Z_:][a-zA-Z0-9_:]*/.exec(line);
    if (!nameMatch) throw new Error(`not a sample line: ${line}`);
    const name = nameMatch[0];
    let i = name.length;
    const labels: Record<string, string> = {};
    if (line[i] === '{') {
      i++;
      for (;;) {
        while (line[i] === ' ' || line[i] === ',') i++;
        if (line[i] === '}') {
          i++;
          break;
        }
        const lm = /^([a-zA-Z_][a-zA-Z0-9_]*)\s*=\s*"/.exec(line.slice(i));
        if (!lm) throw new Error(`bad label at ${i} in: ${line}`);
        i += lm[0].length;
        let value = '';
        for (;;) {
          const ch = line[i];
          if (ch === undefined) throw new Error(`unterminated label value in: ${line}`);
          i++;
          if (ch === '"') break;
          if (ch === '\\') {
            const next = line[i++];
            value += next === 'n' ? '\n' : (next ?? '');
          } else {
            value += ch;
          }
        }
        labels[lm[1]!] = value;
      }
    }
    const rest = line.slice(i).trim().split(/\s+/);
    const valueText = rest[0] ?? '';
    // Like Prometheus (Go's ParseFloat), special values in any case: prom-client writes `Nan`.
    const special: Record<string, number> = { '+inf': Infinity, inf: Infinity, '-inf': -Infinity, nan: NaN };
    const lower = valueText.toLowerCase();
    const value = lower in special ? special[lower]! : Number(valueText);
    if (valueText === '' || (Number.isNaN(value) && lower !== 'nan')) throw new Error(`bad value in: ${line}`);
    samples.push({ name, labels, value });
  }
  return { samples, types, help };
}

/** The sum of every sample named `name` (all label sets); 0 when there is none. */
export function total(e: Exposition, name: string): number {
  return e.samples.filter((s) => s.name === name).reduce((sum, s) => sum + s.value, 0);
}

/** A server's metrics listener, parsed. */
export async function scrapeMetrics(metricsUrl: string): Promise<Exposition> {
  const res = await fetch(`${metricsUrl}/metrics`);
  if (res.status !== 200) throw new Error(`${metricsUrl}/metrics: ${res.status}`);
  return parseExposition(await res.text());
}
