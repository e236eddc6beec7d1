#!/usr/bin/env python3
"""Offline schema and consistency check of deploy/kubernetes (no API server, no network).

    check_manifests.py [PROJECT_ROOT]

Follows every kustomization.yaml from deploy/kubernetes and its orchestrator and examples (its resources, namespace and
images, as `kubectl kustomize` does for these), then checks each object:
- its kind is one we ship, with the required fields and no unknown keys where the API is
  strict about them (objects, pod specs, containers, volumes, mounts);
- what it refers to exists: volume mounts name volumes, config maps, service accounts,
  secrets (unless optional) and claims are shipped or made by a StatefulSet, selectors match
  their pod templates, Services select a workload, ports name container ports;
- it agrees with the rest of the project: programs run are ones deploy/image/build.sh puts in
  the image, the image name is the one the kustomizations rewrite, the extended resource is
  the device plugin's, the NetworkAttachmentDefinition's config is a CNI 1.0 conflist ending
  in wharf-cni with the router socket wharfd is configured with.
Prints every finding and exits 1 if there is one.
"""
import json
import re
import sys
from pathlib import Path

import yaml

OBJECT_KEYS = {'apiVersion', 'kind', 'metadata', 'spec', 'data', 'automountServiceAccountToken'}
METADATA_KEYS = {'name', 'namespace', 'labels', 'annotations'}
KINDS = {  # kind: (apiVersion, required top-level keys)
    'Namespace': ('v1', set()),
    'ServiceAccount': ('v1', set()),
    'ConfigMap': ('v1', {'data'}),
    'Service': ('v1', {'spec'}),
    'Pod': ('v1', {'spec'}),
    'PersistentVolumeClaim': ('v1', {'spec'}),
    'DaemonSet': ('apps/v1', {'spec'}),
    'Deployment': ('apps/v1', {'spec'}),
    'StatefulSet': ('apps/v1', {'spec'}),
    'NetworkAttachmentDefinition': ('k8s.cni.cncf.io/v1', {'spec'}),
}
POD_SPEC_KEYS = {'serviceAccountName', 'hostNetwork', 'hostPID', 'dnsPolicy', 'priorityClassName',
                 'tolerations', 'initContainers', 'containers', 'volumes', 'restartPolicy',
                 'nodeSelector', 'affinity', 'terminationGracePeriodSeconds'}
CONTAINER_KEYS = {'name', 'image', 'command', 'args', 'env', 'envFrom', 'ports', 'resources',
                  'securityContext', 'volumeMounts', 'readinessProbe', 'livenessProbe',
                  'imagePullPolicy', 'workingDir'}
MOUNT_KEYS = {'name', 'mountPath', 'readOnly', 'subPath', 'mountPropagation'}
VOLUME_SOURCES = {'hostPath', 'configMap', 'secret', 'emptyDir', 'persistentVolumeClaim'}
HOSTPATH_TYPES = {'', 'DirectoryOrCreate', 'Directory', 'FileOrCreate', 'File', 'Socket',
                  'CharDevice', 'BlockDevice'}
IMAGE = 'wharf'
INTERFACE_PLUGINS = {'bridge', 'macvlan', 'ipvlan', 'host-device', 'ptp', 'vlan'}
RESOURCE = 'rdma/wharf'

findings = []


def finding(where, msg):
    findings.append(f'{where}: {msg}')


def load_kustomization(directory):
    """The objects a kustomization makes, with its namespace and image rewrites applied."""
    k = yaml.safe_load((directory / 'kustomization.yaml').read_text())
    if k.get('kind') != 'Kustomization':
        finding(directory, 'kustomization.yaml is not a Kustomization')
    objects = []
    for res in k.get('resources', []):
        path = directory / res
        if path.is_dir():
            if not (path / 'kustomization.yaml').exists():
                finding(directory, f'resource {res} is a directory without a kustomization.yaml')
                continue
            objects += load_kustomization(path)
        elif path.exists():
            for doc in yaml.safe_load_all(path.read_text()):
                if doc is not None:
                    objects.append((f'{path.relative_to(ROOT)}', doc))
        else:
            finding(directory, f'resource {res} does not exist')
    rewrites = {i['name']: i for i in k.get('images', [])}
    for _, obj in objects:
        if 'namespace' in k and obj.get('kind') != 'Namespace':
            obj.setdefault('metadata', {})['namespace'] = k['namespace']
        for c in containers_of(obj):
            if c.get('image') in rewrites:
                r = rewrites[c['image']]
                c['image'] = f"{r.get('newName', c['image'])}:{r.get('newTag', 'latest')}"
    return objects


def pod_spec(obj):
    if obj.get('kind') == 'Pod':
        return obj.get('spec', {})
    if obj.get('kind') in ('DaemonSet', 'Deployment', 'StatefulSet'):
        return obj.get('spec', {}).get('template', {}).get('spec', {})
    return None


def containers_of(obj):
    spec = pod_spec(obj) or {}
    return list(spec.get('initContainers', [])) + list(spec.get('containers', []))


def image_programs():
    """Paths build.sh puts in the image: /usr/local/bin/<ours>, /usr/bin/<tools>, scripts."""
    text = (ROOT / 'deploy/image/build.sh').read_text()
    ours = re.search(r'^for p in (.*); do\n.*\n  add "\$BUILD/bin/\$p" /usr/local/bin', text, re.M)
    tools = re.search(r'^for p in (.*); do\n  path=', text, re.M)
    if not ours or not tools:
        finding('deploy/image/build.sh', 'cannot find its lists of programs')
        return set()
    installed = set(re.findall(r'"\$ROOTFS(/usr/local/bin/[\w-]+)"', text))
    return ({f'/usr/local/bin/{p}' for p in ours.group(1).split()} |
            {f'/usr/bin/{p}' for p in tools.group(1).split()} | installed)


def check_object(where, obj, index):
    kind = obj.get('kind')
    if kind not in KINDS:
        finding(where, f'kind {kind!r} is not one the checker knows')
        return
    api, required = KINDS[kind]
    if obj.get('apiVersion') != api:
        finding(where, f'{kind} needs apiVersion {api}, not {obj.get("apiVersion")!r}')
    for key in set(obj) - OBJECT_KEYS:
        finding(where, f'{kind}: unknown key {key!r}')
    for key in required - set(obj):
        finding(where, f'{kind}: missing {key!r}')
    meta = obj.get('metadata', {})
    if not re.fullmatch(r'[a-z0-9]([-a-z0-9.]*[a-z0-9])?', str(meta.get('name', ''))):
        finding(where, f'{kind}: metadata.name {meta.get("name")!r} is not a DNS name')
    for key in set(meta) - METADATA_KEYS:
        finding(where, f'{kind}: unknown metadata key {key!r}')
    name = f'{kind} {meta.get("name")}'
    spec = obj.get('spec', {})
    if kind in ('DaemonSet', 'Deployment', 'StatefulSet'):
        labels = spec.get('template', {}).get('metadata', {}).get('labels', {})
        wanted = spec.get('selector', {}).get('matchLabels', {})
        if not wanted or any(labels.get(k) != v for k, v in wanted.items()):
            finding(where, f'{name}: selector {wanted} does not match its template {labels}')
    if kind == 'Service':
        sel = spec.get('selector', {})
        if not any(all(l.get(k) == v for k, v in sel.items()) for l in index['pod_labels']):
            finding(where, f'{name}: selector {sel} matches no workload')
        for port in spec.get('ports', []):
            if isinstance(port.get('targetPort'), str) and port['targetPort'] not in index['ports']:
                finding(where, f'{name}: targetPort {port["targetPort"]!r} is no container port')
    if kind == 'NetworkAttachmentDefinition':
        check_network(where, obj, index)
    ps = pod_spec(obj)
    if ps is not None:
        check_pod_spec(where, name, ps, obj, index)


def check_pod_spec(where, name, ps, obj, index):
    for key in set(ps) - POD_SPEC_KEYS:
        finding(where, f'{name}: unknown pod spec key {key!r}')
    if not ps.get('containers'):
        finding(where, f'{name}: no containers')
    sa = ps.get('serviceAccountName')
    if sa and sa not in index['ServiceAccount']:
        finding(where, f'{name}: service account {sa!r} is not shipped')
    volumes = {}
    for v in ps.get('volumes', []):
        sources = set(v) & VOLUME_SOURCES
        if set(v) - VOLUME_SOURCES - {'name'} or len(sources) != 1:
            finding(where, f'{name}: volume {v.get("name")!r} needs exactly one known source')
        volumes[v.get('name')] = v
        if 'hostPath' in v and v['hostPath'].get('type', '') not in HOSTPATH_TYPES:
            finding(where, f'{name}: volume {v["name"]!r} has hostPath type {v["hostPath"]["type"]!r}')
        if 'secret' in v and not v['secret'].get('optional') and v['secret'].get('secretName') not in index['Secret']:
            finding(where, f'{name}: secret {v["secret"].get("secretName")!r} is neither shipped nor optional')
        if 'persistentVolumeClaim' in v and v['persistentVolumeClaim'].get('claimName') not in index['PersistentVolumeClaim']:
            finding(where, f'{name}: claim {v["persistentVolumeClaim"].get("claimName")!r} is not shipped')
    claims = {t['metadata']['name'] for t in obj.get('spec', {}).get('volumeClaimTemplates', [])}
    programs = index['programs']
    for c in containers_of(obj):
        cname = f'{name} container {c.get("name")!r}'
        for key in set(c) - CONTAINER_KEYS:
            finding(where, f'{cname}: unknown key {key!r}')
        if c.get('image') != index['image']:
            finding(where, f'{cname}: image {c.get("image")!r}, not {index["image"]!r}')
        command = (c.get('command') or [None])[0]
        if command not in programs:
            finding(where, f'{cname}: runs {command!r}, which deploy/image/build.sh does not ship')
        for m in c.get('volumeMounts', []):
            if set(m) - MOUNT_KEYS:
                finding(where, f'{cname}: unknown mount keys {sorted(set(m) - MOUNT_KEYS)}')
            if m.get('name') not in volumes and m.get('name') not in claims:
                finding(where, f'{cname}: mounts {m.get("name")!r}, which is no volume')
        for ref in c.get('envFrom', []):
            cm = ref.get('configMapRef', {}).get('name')
            if cm and cm not in index['ConfigMap']:
                finding(where, f'{cname}: config map {cm!r} is not shipped')
        for res in ('limits', 'requests'):
            for key in c.get('resources', {}).get(res, {}):
                if '/' in key and key != RESOURCE:
                    finding(where, f'{cname}: extended resource {key!r} is not {RESOURCE!r}')


def check_network(where, obj, index):
    try:
        conf = json.loads(obj['spec']['config'])
    except (KeyError, TypeError, json.JSONDecodeError) as e:
        finding(where, f'NetworkAttachmentDefinition: spec.config is not JSON: {e}')
        return
    if conf.get('cniVersion') != '1.0.0' or not conf.get('plugins'):
        finding(where, 'NetworkAttachmentDefinition: config is not a CNI 1.0.0 conflist')
        return
    last = conf['plugins'][-1]
    if last.get('type') != 'wharf-cni':
        finding(where, 'NetworkAttachmentDefinition: wharf-cni must come last, after an IP plugin')
    if last.get('router') not in (None, index['router_socket']):
        finding(where, f'NetworkAttachmentDefinition: router {last.get("router")!r} is not '
                f'wharfd\'s socket {index["router_socket"]!r}')
    annotation = obj['metadata'].get('annotations', {}).get('k8s.v1.cni.cncf.io/resourceName')
    if annotation != RESOURCE:
        finding(where, f'NetworkAttachmentDefinition: resourceName {annotation!r}, not {RESOURCE!r}')
    for p in conf['plugins'][:-1]:
        if p.get('type') not in INTERFACE_PLUGINS:
            finding(where, f'NetworkAttachmentDefinition: plugin {p.get("type")!r} is not an '
                    f'interface plugin of containernetworking-plugins')


def index_objects(objects):
    """What objects may refer to: names by kind, pod labels, container ports, settings."""
    index = {k: set() for k in KINDS}
    index.update({'Secret': set(), 'pod_labels': [], 'ports': set(), 'programs': image_programs(),
                  'router_socket': None})
    rewrites = yaml.safe_load((ROOT / 'deploy/kubernetes/node/kustomization.yaml').read_text())
    image = rewrites['images'][0]
    index['image'] = f"{image['newName']}:{image['newTag']}"
    for _, obj in objects:
        index.setdefault(obj.get('kind'), set()).add(obj.get('metadata', {}).get('name'))
        if obj.get('kind') == 'ConfigMap' and 'WHARF_SOCKET' in obj.get('data', {}):
            index['router_socket'] = obj['data']['WHARF_SOCKET']
            if obj['data'].get('WHARF_DP_RESOURCE', RESOURCE) != RESOURCE:
                finding('wharf-node ConfigMap', f'WHARF_DP_RESOURCE is not {RESOURCE}')
        spec = obj.get('spec', {})
        if 'template' in spec:
            index['pod_labels'].append(spec['template'].get('metadata', {}).get('labels', {}))
        for c in containers_of(obj):
            index['ports'] |= {p.get('name') for p in c.get('ports', [])}
    return index


def main():
    objects = []
    for part in ('', 'orchestrator', 'examples'):
        objects += load_kustomization(ROOT / 'deploy/kubernetes' / part)
    index = index_objects(objects)
    if not index['router_socket']:
        finding('deploy/kubernetes/node', 'no ConfigMap sets WHARF_SOCKET')
    for where, obj in objects:
        check_object(where, obj, index)
    for f in findings:
        print(f)
    print(f'{len(objects)} objects checked, {len(findings)} findings')
    return 1 if findings else 0


if __name__ == '__main__':
    ROOT = Path(sys.argv[1]).resolve() if len(sys.argv) > 1 else Path(__file__).resolve().parents[2]
    sys.exit(main())
