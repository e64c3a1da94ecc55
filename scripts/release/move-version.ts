/**
 * `node scripts/release/move-version.ts VERSION DATE`: writes VERSION into every place the release's version is
 * written and dates its CHANGELOG entry (scripts/release/versions.ts), then checks that everything agrees with
 * package.json, as the release tag will exist. Prints the files changed; exit 1 listing what still disagrees.
 * Run by scripts/release.sh after `npm version`.
 */
import { moveVersion, versionProblems } from './versions.ts';

const [version, date] = process.argv.slice(2);
if (!version || !date || !/^\d{4}-\d{2}-\d{2}$/.test(date)) {
  console.error('usage: node scripts/release/move-version.ts VERSION YYYY-MM-DD');
  process.exit(2);
}
const root = process.cwd();
for (const file of moveVersion(root, version, date)) console.log(`release: ${file}`);
const problems = versionProblems(root, true);
if (problems.length > 0) {
  console.error(`release: still not ${version}:\n  ${problems.join('\n  ')}`);
  process.exit(1);
}
