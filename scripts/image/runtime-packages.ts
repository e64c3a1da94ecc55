/**
 * The packages the image keeps in /app/node_modules because they cannot be bundled (scripts/image/bundle.ts bundles
 * every other production dependency), each with the files it needs and why. The image test checks that
 * node_modules holds exactly these, and runs each through the bundle (the ZooKeeper client on a real ZooKeeper,
 * the dashboard's page and static files).
 */
export const RUNTIME_PACKAGES: Record<string, { files: string[]; why: string }> = {
  zookeeper: {
    files: ['package.json', 'LICENSE-MIT.txt', 'lib', 'build/Release/zookeeper.node'],
    why: 'a native addon (built in the image with patches/), loaded by node-gyp-build from its own directory',
  },
  'node-gyp-build': { files: ['.'], why: 'loads the ZooKeeper addon from the zookeeper package directory' },
  async: { files: ['.'], why: 'required by the zookeeper package, which stays unbundled' },
  '@bull-board/ui': {
    files: ['package.json', 'dist'],
    why: 'the dashboard page and its static files, served from the directory @bull-board/api finds with require.resolve at run time',
  },
};
