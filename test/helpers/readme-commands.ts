/**
 * The shell commands a Markdown document shows: the lines of its fenced `sh`/`bash`/`shell`/`console`
 * blocks, with `\` continuations joined, `# comments` and a leading `$ ` prompt removed, one command per
 * entry. A small parser for the README's own conventions, not a shell: `#` starts a comment only at the
 * start of a line or after a blank, outside quotes.
 */

const SHELL_LANGS: ReadonlySet<string> = new Set(['sh', 'bash', 'shell', 'console', 'shell-session']);

/** `line` without its trailing `# comment` (a `#` at the start or after a blank, outside quotes). */
function stripComment(line: string): string {
  let quote: string | undefined;
  for (let i = 0; i < line.length; i++) {
    const ch = line[i];
    if (quote) {
      if (ch === quote) quote = undefined;
    } else if (ch === "'" || ch === '"') quote = ch;
    else if (ch === '#' && (i === 0 || /\s/.test(line[i - 1] ?? ''))) return line.slice(0, i);
  }
  return line;
}

/** Every command in the fenced shell blocks of `markdown`, in order, each on one line with single spaces. */
export function shellCommands(markdown: string): string[] {
  const commands: string[] = [];
  let inShell = false;
  let inOther = false;
  let pending = '';
  for (const raw of markdown.split('\n')) {
    const fence = /^\s*```\s*([\w-]*)/.exec(raw);
    if (fence) {
      if (inShell || inOther) {
        if (pending.trim()) commands.push(pending.trim());
        pending = '';
        inShell = inOther = false;
      } else if (SHELL_LANGS.has((fence[1] ?? '').toLowerCase())) inShell = true;
      else inOther = true;
      continue;
    }
    if (!inShell) continue;
    const line = stripComment(raw).replace(/^\s*\$ /, '');
    const continued = /\\\s*$/.test(line);
    pending += ` ${line.replace(/\\\s*$/, '').trim()}`;
    if (continued) continue;
    const command = pending.trim().replace(/\s+/g, ' ');
    if (command) commands.push(command);
    pending = '';
  }
  return commands;
}
