/**
 * Discovery documents so kubectl can find the resources served (pods, namespaces, and
 * authorization.k8s.io's selfsubjectaccessreviews): `/version`, `/api`, `/api/v1`, `/apis`,
 * `/apis/authorization.k8s.io/v1`, plus `/healthz` `/livez` `/readyz`. kubectl asks for aggregated discovery first and falls back to
 * these legacy documents when the answer's content type is plain `application/json`.
 */

/** The JSON body for a discovery path, or undefined when the path is not a discovery path. */
export function discoveryDocument(pathname: string, hostPort: string): string | undefined {
  switch (pathname) {
    case '/version':
      return JSON.stringify({
        major: '1',
        minor: '32',
        gitVersion: 'v1.32.0-sandbox',
        gitCommit: '0000000000000000000000000000000000000000',
        gitTreeState: 'clean',
        buildDate: '2026-01-01T00:00:00Z',
        goVersion: 'go1.23.0',
        compiler: 'gc',
        platform: 'linux/amd64',
      });
    case '/api':
      return JSON.stringify({
        kind: 'APIVersions',
        versions: ['v1'],
        serverAddressByClientCIDRs: [{ clientCIDR: '0.0.0.0/0', serverAddress: hostPort }],
      });
    case '/api/v1':
      return JSON.stringify({
        kind: 'APIResourceList',
        groupVersion: 'v1',
        resources: [
          {
            name: 'pods',
            singularName: 'pod',
            namespaced: true,
            kind: 'Pod',
            verbs: ['create', 'delete', 'get', 'list', 'patch', 'update', 'watch'],
            shortNames: ['po'],
            categories: ['all'],
          },
          {
            name: 'pods/status',
            singularName: '',
            namespaced: true,
            kind: 'Pod',
            verbs: ['get', 'patch', 'update'],
          },
          {
            name: 'namespaces',
            singularName: 'namespace',
            namespaced: false,
            kind: 'Namespace',
            verbs: ['create', 'delete', 'get', 'list', 'patch', 'update', 'watch'],
            shortNames: ['ns'],
          },
        ],
      });
    case '/apis':
      return JSON.stringify({
        kind: 'APIGroupList',
        apiVersion: 'v1',
        groups: [
          {
            name: 'authorization.k8s.io',
            versions: [{ groupVersion: 'authorization.k8s.io/v1', version: 'v1' }],
            preferredVersion: { groupVersion: 'authorization.k8s.io/v1', version: 'v1' },
          },
        ],
      });
    case '/apis/authorization.k8s.io/v1':
      return JSON.stringify({
        kind: 'APIResourceList',
        apiVersion: 'v1',
        groupVersion: 'authorization.k8s.io/v1',
        resources: [
          {
            name: 'selfsubjectaccessreviews',
            singularName: 'selfsubjectaccessreview',
            namespaced: false,
            kind: 'SelfSubjectAccessReview',
            verbs: ['create'],
          },
        ],
      });
    default:
      return undefined;
  }
}

/** Health endpoints answer plain `ok`. */
export function isHealthPath(pathname: string): boolean {
  return pathname === '/healthz' || pathname === '/livez' || pathname === '/readyz';
}
